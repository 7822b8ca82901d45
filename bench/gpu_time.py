"""GPU time per trustworthy decision: the seed case priced per strategy, and how often it is right.

Not a test: numbers, not verdicts. The seed case (../shared/reference/seed-case.md): one 8-GPU
host, a load of 12.5 min per launch, steps 1-5 and the baseline (6 configs) x levels 1, 16, 64 x
2 workloads (chat: 80 two-turn records; code: 164), 96 tokens per request, 3 repeats. True tok/s
at c = 1 is the campaign's (baseline 88.8, 2 steps +5.9% the best, 5 steps below the baseline);
speculation's gain shrinks with the batch (half at 16, a loss at 64). A launch draws a launch
effect N(0, launch sd) on log tok/s (bench/trust.py's LAUNCH: this 2-core machine's; a GPU host's is
smaller, so rows for 0.5%, 2% and 5% too) and each level's mean over its requests an error of
cv / sqrt(requests) (cv: request-to-request spread, CV below).

A decision is the config with the highest mean log tok/s at each level (over its launches); it is
right where that is the true best. Strategies:

- hand loop: each config launched once, the full prompt sets (the seed's 6 launches);
- today: one launch each, the baseline again at the end, the finalists (every config within noise
  of the best, on the within-launch interval) launched once more; every level sends its records;
- improved: the same order, levels that stop at a 3% interval (analysis.sweep.estimate, the
  sweep's own arithmetic), and finalists judged with the host's known launch spread (its history:
  the prior of item 3) so only a close call is launched again, then again until it is resolved or
  3 launches of it ran; where 3 launches could not resolve a 1% difference at that spread, none.

Columns: launches (mean), GPU h per decision (launches x (load + benchmark) x 8 GPUs), best (share
of levels whose decision is the true best: the coverage), within 1% (share whose decision's true
tok/s is within 1% of the best's: as good a config, where configs 1-2% apart cannot be told apart).

    .venv/bin/python bench/gpu_time.py [--trials 2000] [--seed 1]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trust import LAUNCH  # bench/ is not a package: the trust bench's launch spread

from analysis.sweep import estimate

LOAD_S = 12.5 * 60
GPUS = 8
TOKENS = 96
REPEATS = 3
LEVELS = (1, 16, 64)
WORKLOADS = {"chat": (80, 2.0), "code": (164, 1.0)}  # records, requests per record
BASE_TPS = 88.8  # the baseline at c = 1 (seed case)
SCALE = 0.7  # throughput ~ c ** SCALE (a batch shares the GPU)
GAIN_AT_1 = {"baseline": 0.0, "s1": 0.03, "s2": 0.059, "s3": 0.04, "s4": 0.01, "s5": -0.02}
# Speculation's gain at a level: c = 1's scaled, less a verify cost that grows with the batch.
GAIN_FACTOR = {1: 1.0, 16: 0.6, 64: 0.25}
GAIN_COST = {1: 0.0, 16: 0.01, 64: 0.04}
INDIFFERENT = 0.01  # a config within 1% of the true best is as good a decision
CV = 0.05  # request-to-request tok/s spread on a GPU at one level (one prompt set)
CI_PCT = 3.0


def truth() -> pd.DataFrame:
    """True log tok/s per config (rows) and level (columns)."""
    return pd.DataFrame(
        {
            c: [
                np.log(BASE_TPS * c**SCALE * (1 + (g * GAIN_FACTOR[c] - GAIN_COST[c] if g else 0.0)))
                for g in GAIN_AT_1.values()
            ]
            for c in LEVELS
        },
        index=list(GAIN_AT_1),
    )


def measure() -> estimate.Measure:
    """Today's levels (every record) or the improved ones (stop at CI_PCT)."""
    return estimate.Measure(REPEATS, 1, None, None, CI_PCT, 8, 60.0)


def bench_s(stopping: bool) -> tuple[float, dict[int, int]]:
    """One launch's benchmark seconds, and the requests each level measures (summed over workloads
    and repeats), by the sweep's own level arithmetic."""
    m = measure() if stopping else estimate.Measure(REPEATS, 1, None, None, 0.0, 8, None)
    seconds, requests = 0.0, dict.fromkeys(LEVELS, 0)
    for records, turns in WORKLOADS.values():
        for c in LEVELS:
            tps = BASE_TPS * c**SCALE
            level = estimate.Level(None, c, max(4 * c, records), turns, TOKENS)
            s = estimate.level_seconds(level, m, tps, CV)
            seconds += REPEATS * s
            requests[c] += int(REPEATS * s * tps / TOKENS)
    return seconds, requests


def draw(rng: np.random.Generator, t: pd.DataFrame, configs: list[str], requests: dict[int, int],
         launch_sd: float) -> pd.DataFrame:  # fmt: skip
    """One launch of each of `configs`: measured mean log tok/s per level."""
    noise = np.array([CV / np.sqrt(requests[c]) for c in LEVELS])
    effect = rng.normal(0.0, launch_sd, (len(configs), 1))
    return t.loc[configs] + effect + rng.normal(0.0, 1.0, (len(configs), len(LEVELS))) * noise


Strategy = Callable[[np.random.Generator, pd.DataFrame, float], tuple[int, pd.Series]]


def hand_loop(rng: np.random.Generator, t: pd.DataFrame, launch_sd: float) -> tuple[int, pd.Series]:
    """Each config once: (launches, the config chosen per level)."""
    _, requests = bench_s(False)
    seen = draw(rng, t, list(t.index), requests, launch_sd)
    return len(t), seen.idxmax()


def _finalists(means: pd.DataFrame, sd: float) -> set[str]:
    """Configs within noise of the best at some level: a gap under 1.96 x sqrt(2) x sd."""
    close = means.max() - means < 1.96 * np.sqrt(2) * sd
    return set(close.index[close.any(axis=1)])


def today(rng: np.random.Generator, t: pd.DataFrame, launch_sd: float) -> tuple[int, pd.Series]:
    """One launch each, the baseline again, within-launch finalists once more."""
    _, requests = bench_s(False)
    first = draw(rng, t, list(t.index), requests, launch_sd)
    again = draw(rng, t, ["baseline"], requests, launch_sd)
    # Within noise on the repeats' interval: it sees the requests' spread, not the launch's.
    finals = sorted(_finalists(first.drop(index=["baseline"]), CV / np.sqrt(min(requests.values()))))
    second = draw(rng, t, finals, requests, launch_sd)
    means = pd.concat([first, again, second]).groupby(level=0).mean()
    return len(t) + 1 + len(finals), means.idxmax()


def improved(
    rng: np.random.Generator, t: pd.DataFrame, launch_sd: float, most: int = 3
) -> tuple[int, pd.Series]:
    """Stopping levels; finalists judged with the known launch spread, relaunched until resolved."""
    _, requests = bench_s(True)
    runs = [draw(rng, t, list(t.index), requests, launch_sd), draw(rng, t, ["baseline"], requests, launch_sd)]
    counts = pd.Series(1, index=t.index)
    counts["baseline"] = 2
    launches = len(t) + 1
    # A close call that `most` launches could not resolve is not worth a launch: the host's launch
    # spread (its history) says so before any is spent.
    if 1.96 * np.sqrt(2) * launch_sd / np.sqrt(most) > INDIFFERENT:
        return launches, pd.concat(runs).groupby(level=0).mean().idxmax()
    while True:
        means = pd.concat(runs).groupby(level=0).mean()
        # The sd of a config's mean over its launches: the host's launch spread over sqrt(launches).
        sd_mean = np.sqrt(launch_sd**2 / counts + CV**2 / min(requests.values()))
        gap = means.max() - means
        # Close: the rival may be better by more than the indifference margin.
        close = (gap + INDIFFERENT).lt(1.96 * np.sqrt(2) * sd_mean.to_numpy()[:, None]) & gap.gt(0)
        again: set[str] = set()
        for c in LEVELS:
            rivals = set(close.index[close[c]])
            again |= {means[c].idxmax(), *rivals} if rivals else set()
        again = {x for x in again if counts[x] < most}
        if not again:
            return launches, means.idxmax()
        runs.append(draw(rng, t, sorted(again), requests, launch_sd))
        counts[sorted(again)] += 1
        launches += len(again)


STRATEGIES: dict[str, tuple[Strategy, bool]] = {
    "hand loop (6 launches, all records)": (hand_loop, False),
    "today's defaults": (today, False),
    "improved (stop at 3%, launch-spread prior)": (improved, True),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    t = truth()
    full, _ = bench_s(False)
    short, requests = bench_s(True)
    print(
        f"seed case: load {LOAD_S / 60:.1f} min, benchmark {full / 60:.1f} min per launch with every record, "
        f"{short / 60:.1f} min stopping at {CI_PCT:.0f}% (requests per level {requests}); {GPUS} GPUs"
    )
    print(f"true best per level: {dict(t.idxmax())}")
    header = f"{'launch sd':>9}  {'strategy':<44} {'launches':>8} {'GPU h':>6} {'best':>8} {'within 1%':>10}"
    print(header)
    print("-" * len(header))
    for launch_sd in sorted({0.005, 0.02, 0.05, LAUNCH}):
        for name, (strategy, stopping) in STRATEGIES.items():
            rng = np.random.default_rng(args.seed)
            per_launch = LOAD_S + (short if stopping else full)
            launches, right, good = [], 0, 0
            for _ in range(args.trials):
                n, chosen = strategy(rng, t, launch_sd)
                launches.append(n)
                right += int(chosen.eq(t.idxmax()).sum())
                lost = t.max() - pd.Series({c: t.loc[chosen[c], c] for c in LEVELS})
                good += int(lost.le(np.log1p(INDIFFERENT)).sum())
            mean = float(np.mean(launches))
            hours = mean * per_launch * GPUS / 3600
            print(
                f"{launch_sd:>8.1%}  {name:<44} {mean:>8.1f} {hours:>6.1f} "
                f"{right / (args.trials * len(LEVELS)):>8.1%} {good / (args.trials * len(LEVELS)):>10.1%}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
