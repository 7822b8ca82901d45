"""The engines specsweep sweeps, and the one list of them.

An engine is one module here that declares an `Engine` (analysis.engines.base): its launch argv from
a config and the host's settings and version, what it can run (algorithms, axes, clients, adaptive
schedule, multi-node), its preflight role and how that role has the host's own engine validate the
grid. Everything else reads this list: the plan, the sweep axes, the fact schema, the engine
options of the roles (documented as this list) and the two host-side tables keyed by engine name
(tests/unit/test_engines.py checks them).
docs/extending.md walks adding one.
"""

from __future__ import annotations

from analysis.engines import llama_cpp, sglang, vllm
from analysis.engines.base import Adaptive, Engine, Point, ScheduleError, SettingError, Settings

ENGINES: dict[str, Engine] = {e.name: e for e in (llama_cpp.ENGINE, sglang.ENGINE, vllm.ENGINE)}
NAMES: tuple[str, ...] = tuple(ENGINES)
# The engine of a host that names none (specsweep_engine): the embedded CPU demo.
DEFAULT = llama_cpp.NAME

__all__ = ["DEFAULT", "ENGINES", "NAMES", "Adaptive", "Engine", "Point", "ScheduleError", "SettingError",
           "Settings", "with_axis"]  # fmt: skip


def with_axis(axis: str) -> tuple[str, ...]:
    """The engines that have a sweep axis besides steps (steps: every engine)."""
    return tuple(n for n, e in ENGINES.items() if axis == "steps" or axis in e.axes)
