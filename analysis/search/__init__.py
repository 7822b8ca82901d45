"""The step search: find the step count with the highest decode throughput in few server launches.

Why a search: a sweep launches the server once per config, and on a large model a launch costs
10-15 minutes of an 8-GPU host. Throughput against steps is unimodal (it rises while the extra
drafted tokens get accepted, then falls once drafting costs more than it saves; an OOM at high
steps only adds a failing tail), so a bracketing search finds the best of ten step counts in five
launches instead of ten.

Layers, the first two free of I/O and of pandas:
- `decide`: observations in; the next probes, `wait` or `done` out (an exact minimax placement);
  `levels`: the same for several concurrency levels measured by each launch.
- `objective`: the number a probe is judged by, read from facts.
- `state`: stateless on purpose. The facts on disk and the claim folders are the whole state, so
  a host may ask at any time, several hosts may ask at once, and a resumed run simply asks again.
- `cli`: `python -m analysis search next|summary`.
"""
