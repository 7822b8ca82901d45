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

A second table: the search over several concurrency levels (`analysis.search.levels`), steps 1..8
at concurrency 1, 4 and 16, where one launch measures every level. Curves whose optimum moves
with load: at concurrency 1 a speedup curve (as above) peaking at a random step of 3..8; at 4 the
peak is 0-1 step lower, at 16 another 0-2 lower (at least 1), and each level's curve is drawn on
its own. The "independent peaks" row draws each level's peak anywhere (no relation to load): the
worst case for shared launches. Launches exclude the baseline (one more launch, as for the grid:
8 + baseline); <=6: share of searches done in six launches; exact / named / sure / sure+wrong /
loss per level. "one level after another" runs the single-level search at concurrency 1, then at
4 and 16 reusing every launch made so far.

    .venv/bin/python bench/search.py [--trials 300] [--seed 1] [--table steps|levels|both]
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
from analysis.search.levels import decide_levels

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


def steps_table(trials: int, rng: random.Random) -> None:
    """Print the single-level table (steps 1..10)."""

    def randoms(make: Callable[[random.Random], Curve]) -> list[Curve]:
        return [make(rng) for _ in range(trials)]

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


LEVELS = (1, 4, 16)
LEVEL_STEPS = list(range(1, 9))
Curves = list[list[float]]  # one true curve per level, LEVEL_STEPS long


def shaped(peak: int, rng: random.Random, n: int = len(LEVEL_STEPS)) -> list[float]:
    """A speedup curve over n steps peaking at position `peak`, each step away 2-15% slower."""
    curve = [1.8] * n
    for i in range(peak - 1, -1, -1):
        curve[i] = curve[i + 1] * (1 - rng.uniform(0.02, 0.15))
    for i in range(peak + 1, n):
        curve[i] = curve[i - 1] * (1 - rng.uniform(0.02, 0.15))
    return curve


def moving(rng: random.Random) -> Curves:
    """Optimum at steps 3..8 at concurrency 1, 0-1 step lower at 4, another 0-2 lower at 16."""
    p1 = rng.randrange(2, len(LEVEL_STEPS))
    p4 = max(p1 - rng.randint(0, 1), 0)
    p16 = max(p4 - rng.randint(0, 2), 0)
    return [shaped(p, rng) for p in (p1, p4, p16)]


def independent(rng: random.Random) -> Curves:
    """Each level's optimum anywhere: no relation to load."""
    return [shaped(rng.randrange(len(LEVEL_STEPS)), rng) for _ in LEVELS]


@dataclass(frozen=True)
class LevelsOutcome:
    """One multi-level search on one set of curves; per-level flags."""

    launches: int
    rounds: int
    exact: list[bool]
    named: list[bool]
    sure: list[bool]
    loss: list[float]


def _level_score(curves: Curves, answers: list[tuple[int | None, tuple[int, ...], bool]]) -> dict:
    """Per-level exact / named / sure / loss of (best, close, sure) answers."""
    out: dict[str, list] = {"exact": [], "named": [], "sure": [], "loss": []}
    for curve, (best, close, sure) in zip(curves, answers, strict=True):
        top = LEVEL_STEPS[curve.index(max(curve))]
        out["exact"].append(best == top)
        out["named"].append(best == top or top in close)
        out["sure"].append(sure)
        out["loss"].append(1.0 - (curve[best - 1] if best else 0.0) / max(curve))
    return out


def joint(curves: Curves, parallel: int, cv: float, rng: random.Random) -> LevelsOutcome:
    """The multi-level search to done; each launch measures every level."""
    observations: dict[int, dict[int, Probe]] = {c: {} for c in LEVELS}
    rounds = 0
    while (d := decide_levels(LEVEL_STEPS, LEVELS, observations, set(), parallel)).action == "measure":
        rounds += 1
        for pick in d.picks:
            for c, curve in zip(LEVELS, curves, strict=True):
                observations[c][pick.steps] = measure(curve[pick.steps - 1], cv, rng)
    answers = [(d.levels[c].best, d.levels[c].close, d.levels[c].sure) for c in LEVELS]
    return LevelsOutcome(len(observations[LEVELS[0]]), rounds, **_level_score(curves, answers))


def one_by_one(curves: Curves, parallel: int, cv: float, rng: random.Random) -> LevelsOutcome:
    """The single-level search at each level in turn, reusing every launch made so far."""
    observations: dict[int, dict[int, Probe]] = {c: {} for c in LEVELS}
    rounds = 0
    answers = []
    for level in LEVELS:
        while (d := decide(LEVEL_STEPS, observations[level], set(), parallel)).action == "measure":
            rounds += 1
            for pick in d.picks:
                for c, curve in zip(LEVELS, curves, strict=True):
                    observations[c][pick.steps] = measure(curve[pick.steps - 1], cv, rng)
        answers.append((d.best, d.close, d.sure))
    return LevelsOutcome(len(observations[LEVELS[0]]), rounds, **_level_score(curves, answers))


def full_grid(curves: Curves, parallel: int, cv: float, rng: random.Random) -> LevelsOutcome:
    """Launch every step count and keep each level's highest median."""
    answers = []
    for curve in curves:
        probes = {s: measure(v, cv, rng) for s, v in zip(LEVEL_STEPS, curve, strict=True)}
        answers.append((max(probes, key=lambda s: probes[s].median), (), False))
    rounds = math.ceil(len(LEVEL_STEPS) / parallel)
    return LevelsOutcome(len(LEVEL_STEPS), rounds, **_level_score(curves, answers))


LevelsRunner = Callable[[Curves, int, float, random.Random], LevelsOutcome]
LEVELS_HEADER = [
    "curves", "strategy", "noise (CV)", "parallel", "trials", "launches med / max", "+ baseline",
    "<=6", "rounds med / max", "exact", "named", "sure", "sure+wrong", "loss",
]  # fmt: skip


def levels_row(
    label: str, name: str, curves: list[Curves], parallel: int, cv: float, rng: random.Random,
    runner: LevelsRunner,
) -> str:  # fmt: skip
    """One markdown row of the multi-level table; per-level columns over every level of every trial."""
    outs = [runner(c, parallel, cv, rng) for c in curves]
    launches = [o.launches for o in outs]
    rounds = [o.rounds for o in outs]

    def share(values: Iterable[bool]) -> str:
        flags = list(values)
        return f"{100.0 * sum(flags) / len(flags):.1f}%"

    searched = runner is not full_grid
    cells = [
        label,
        name,
        f"{cv:.0%}" if cv else "none",
        str(parallel),
        str(len(outs)),
        f"{statistics.median(launches):g} / {max(launches)}",
        f"{statistics.median(launches) + 1:g} / {max(launches) + 1}",
        share(n <= 6 for n in launches),
        f"{statistics.median(rounds):g} / {max(rounds)}",
        share(x for o in outs for x in o.exact),
        share(x for o in outs for x in o.named),
        share(x for o in outs for x in o.sure) if searched else "–",
        share(s and not e for o in outs for s, e in zip(o.sure, o.exact, strict=True)) if searched else "–",
        f"{100.0 * statistics.fmean(x for o in outs for x in o.loss):.2f}%",
    ]
    return "| " + " | ".join(cells) + " |"


def levels_table(trials: int, rng: random.Random) -> None:
    """Print the multi-level table."""
    print("| " + " | ".join(LEVELS_HEADER) + " |")
    print("|" + "---|" * len(LEVELS_HEADER))
    strategies: list[tuple[str, LevelsRunner]] = [
        ("joint (levels)", joint), ("one level after another", one_by_one), ("full grid", full_grid),
    ]  # fmt: skip
    for cv in (0.0, 0.03):
        curves = [moving(rng) for _ in range(trials)]
        for name, runner in strategies:
            print(levels_row("optimum moves with load", name, curves, 1, cv, rng, runner))
        for name, runner in strategies[:2]:
            print(levels_row("optimum moves with load", name, curves, 2, cv, rng, runner))
        spread = [independent(rng) for _ in range(trials)]
        for name, runner in strategies[:2]:
            print(levels_row("independent peaks", name, spread, 1, cv, rng, runner))


def main() -> None:
    """Print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=300, help="random curves per row")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--table", choices=["steps", "levels", "both"], default="both")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    if args.table in ("steps", "both"):
        steps_table(args.trials, rng)
    if args.table in ("levels", "both"):
        print()
        levels_table(args.trials, rng)


if __name__ == "__main__":
    main()
