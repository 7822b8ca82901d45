"""Launches the step-count search needs to find the best of 1..10, against a full grid (10 launches).

Not a test: numbers, not verdicts. Each row runs `analysis.search.decide` to `done` on synthetic
throughput curves, measuring every probe it asks for (3 repeats with Gaussian noise of the given CV)
in synchronous rounds of `parallel` probes, as hosts of a shard would. Curves:
- all shapes: every order type of a strictly unimodal curve on 10 points (512; a noiseless search
  sees only comparisons, so this is every curve it can tell apart);
- random: a 1.8x peak at a random step, each step away 2-15% slower (speedup curves of EAGLE-3);
- monotone rising and falling; a plateau of 2 at the peak (every order type); an OOM tail (launches
  failing from a random step past the peak on).
Columns: launches and rounds (median / max); exact: the reported best is the optimum; named: the
optimum is the reported best or listed within noise of it; sure: the search said it was sure;
sure+wrong: it said so about a wrong answer; loss: mean throughput lost against the optimum. The
grid rows launch all 10 configs and take the highest median.

    .venv/bin/python bench/search.py [--trials 300] [--seed 1]
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import statistics
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.search.decide import Probe, decide

STEPS = list(range(1, 11))
REPEATS = 3
Curve = list[float | None]  # true objective by step; None: the launch fails


@dataclass(frozen=True)
class Outcome:
    """One search (or grid) on one curve."""

    launches: int
    rounds: int
    exact: bool
    named: bool
    sure: bool
    loss: float


def order_types(plateau: int = 1) -> list[Curve]:
    """Every strictly unimodal order type on 10 points with a flat top `plateau` wide."""
    others = len(STEPS) - plateau
    curves: list[Curve] = []
    for count in range(others + 1):
        for left in itertools.combinations(range(others), count):
            right = sorted(set(range(others)) - set(left), reverse=True)
            curves.append([r + 1.0 for r in sorted(left)] + [100.0] * plateau + [r + 1.0 for r in right])
    return curves


def speedup_curve(rng: random.Random) -> list[float]:
    """A 1.8x peak at a random step; each step away 2-15% slower."""
    peak = rng.randrange(len(STEPS))
    curve = [1.8] * len(STEPS)
    for i in range(peak - 1, -1, -1):
        curve[i] = curve[i + 1] * (1 - rng.uniform(0.02, 0.15))
    for i in range(peak + 1, len(STEPS)):
        curve[i] = curve[i - 1] * (1 - rng.uniform(0.02, 0.15))
    return curve


def oom_tail(rng: random.Random) -> Curve:
    """A speedup curve whose launches fail from a random step past its peak on."""
    curve: Curve = list(speedup_curve(rng))
    peak = curve.index(max(v for v in curve if v is not None))
    if peak + 1 < len(STEPS):
        start = rng.randrange(peak + 1, len(STEPS))
        curve[start:] = [None] * (len(STEPS) - start)
    return curve


def measure(value: float | None, cv: float, rng: random.Random) -> Probe:
    """One launch: REPEATS samples of the true value with noise, or a failure."""
    if value is None:
        return Probe(failed=True)
    return Probe(tuple(value * max(1 + rng.gauss(0, cv), 0.01) for _ in range(REPEATS)))


def score(
    curve: Curve, best: int | None, close: Iterable[int], sure: bool, launches: int, rounds: int
) -> Outcome:
    """How good an answer is against the true curve."""
    top = max(v for v in curve if v is not None)
    optima = {s for s, v in zip(STEPS, curve, strict=True) if v == top}
    value = curve[best - 1] if best is not None else None
    exact = best in optima
    loss = 1.0 - (value or 0.0) / top
    return Outcome(launches, rounds, exact, exact or bool(optima & set(close)), sure, loss)


def search(curve: Curve, parallel: int, cv: float, rng: random.Random) -> Outcome:
    """Run the search to done; every round measures all the probes it asked for."""
    observations: dict[int, Probe] = {}
    rounds = 0
    while (d := decide(STEPS, observations, set(), parallel)).action == "measure":
        rounds += 1
        for pick in d.picks:
            observations[pick.steps] = measure(curve[pick.steps - 1], cv, rng)
    return score(curve, d.best, d.close, d.sure, len(observations), rounds)


def grid(curve: Curve, parallel: int, cv: float, rng: random.Random) -> Outcome:
    """Launch every config and keep the highest median."""
    probes = {s: measure(v, cv, rng) for s, v in zip(STEPS, curve, strict=True)}
    ok = [s for s, p in probes.items() if not p.failed]
    best = max(ok, key=lambda s: probes[s].median) if ok else None
    return score(curve, best, (), False, len(STEPS), math.ceil(len(STEPS) / parallel))


Runner = Callable[[Curve, int, float, random.Random], Outcome]


def row(label: str, curves: list[Curve], parallel: int, cv: float, rng: random.Random, runner: Runner) -> str:
    """One markdown row over `curves`."""
    outs = [runner(c, parallel, cv, rng) for c in curves]
    n = len(outs)

    def pct(flag: Callable[[Outcome], bool]) -> str:
        return f"{100.0 * sum(map(flag, outs)) / n:.0f}%"

    launches = [o.launches for o in outs]
    rounds = [o.rounds for o in outs]
    noise = f"{cv:.0%}" if cv else "none"
    cells = [
        label,
        noise,
        str(parallel),
        str(n),
        f"{statistics.median(launches):g} / {max(launches)}",
        f"{statistics.median(rounds):g} / {max(rounds)}",
        pct(lambda o: o.exact),
        pct(lambda o: o.named),
        pct(lambda o: o.sure) if runner is search else "–",
        pct(lambda o: o.sure and not o.exact) if runner is search else "–",
        f"{100.0 * statistics.fmean(o.loss for o in outs):.2f}%",
    ]
    return "| " + " | ".join(cells) + " |"


HEADER = [
    "curves",
    "noise (CV)",
    "parallel",
    "trials",
    "launches med / max",
    "rounds med / max",
    "exact",
    "named",
    "sure",
    "sure+wrong",
    "loss",
]


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=300, help="random curves per row")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    def randoms(make: Callable[[random.Random], Curve]) -> list[Curve]:
        return [make(rng) for _ in range(args.trials)]

    rising: Curve = [1.0 + 0.1 * s for s in STEPS]
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "---|" * len(HEADER))
    for parallel in (1, 2, 3):
        print(row("all 512 shapes", order_types(), parallel, 0.0, rng, search))
        print(row("random speedup", randoms(speedup_curve), parallel, 0.0, rng, search))
        print(row("monotone (rise, fall)", [rising, rising[::-1]], parallel, 0.0, rng, search))
    print(row("plateau of 2 at peak", order_types(plateau=2), 1, 0.0, rng, search))
    print(row("OOM tail", randoms(oom_tail), 1, 0.0, rng, search))
    for cv in (0.01, 0.03, 0.05):
        curves = randoms(speedup_curve)
        for parallel in (1, 2, 3):
            print(row("random speedup", curves, parallel, cv, rng, search))
        print(row("random speedup, full grid", curves, 1, cv, rng, grid))


if __name__ == "__main__":
    main()
