"""GPU time per trustworthy decision: the seed case priced per strategy, and how often it is right.

Not a test: numbers, not verdicts. The seed case (../shared/reference/seed-case.md): one 8-GPU
host, a load of 12.5 min per launch, steps 1-5 and the baseline (6 configs) x levels 1, 16, 64 x
2 workloads (chat: 80 two-turn records; code: 164), 96 tokens per request, 3 repeats. True tok/s
at c = 1 is the campaign's (baseline 88.8, 2 steps +5.9% the best, 5 steps below the baseline);
speculation's gain shrinks with the batch (half at 16, a loss at 64). A launch draws a launch
effect N(0, launch sd) on log tok/s (bench/trust.py's LAUNCH, 20%: this 2-core machine's; a GPU
host's is smaller, so rows for 0.5% and 2% too) and each repeat's mean over its share of a level's
requests an error of cv / sqrt(requests) (cv: request-to-request spread, CV below).

Strategies:

- hand loop: each config launched once, the full prompt sets (the seed's 6 launches); the highest
  mean per level is its decision;
- the sweep's own rule, on a host whose history knows its launch spread (the launch sd, worth
  HISTORY_DF degrees of freedom), with levels sized as its plan sizes them there (the default:
  what a launch is worth, analysis.sweep.levelsize, within the launch's cost; --ci-pct for an
  interval, --level-budget-s; analysis.sweep.estimate, the sweep's level arithmetic): its order
  (analysis.sweep.order, the baseline again or not by analysis.sweep.launchprior.baseline_every),
  the finalists chosen on launch 1's step table (the
  report's, analysis.report.compare.step_table), and the decision the report's best per level over
  every launch. "main": the rule before the prior (the baseline again at the end; every close
  call's best and speculative rivals relaunched once, analysis.report.closecall.close_calls).
  "95%": the rule with the prior (no baseline-again launch where the spread is from history; a
  close call relaunched once, the baseline too, unless one more launch of each could not resolve
  it: analysis.running.prior.finalists) where a 95% interval makes a close call; "80%": today's
  defaults, an 80% one (analysis.sweep.launchprior.FINALIST_CONFIDENCE); "one launch each": the
  same without finalists (-e finalists=false), each level decided by its one launch. The levels are one
  workload here (the two sets' requests pooled): three groups to judge where the sweep would judge
  six (workload, level) groups.

Columns: launches (mean), GPU h per decision (launches x (load + benchmark) x 8 GPUs), best (share
of levels whose decision is the true best: the coverage), within 1% (share whose decision's true
tok/s is within 1% of the best's: as good a config, where configs 1-2% apart cannot be told apart).

    .venv/bin/python bench/gpu_time.py [--trials 300] [--seed 1] [--ci-pct 3 --level-budget-s 60]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trust import LAUNCH  # bench/ is not a package: the trust bench's launch spread

from analysis.facts.load import RUN_COLUMNS, frame
from analysis.report.closecall import close_calls
from analysis.report.compare import step_table
from analysis.running import prior
from analysis.sweep import estimate, launchprior, levelsize, order
from analysis.sweep.launchprior import LaunchPrior

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
CI_PCT = 3.0  # the interval rule's bench_ci_pct and bench_level_budget_s (no history of the host)
LEVEL_BUDGET_S = 60.0
HISTORY_DF = 10.0  # the degrees of freedom of the host's history spread (a few earlier sweeps)


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


def measure(
    ci_pct: float | None = CI_PCT, budget_s: float | None = LEVEL_BUDGET_S, launch_sd: float | None = None
) -> estimate.Measure:
    """The sweep's levels as its plan sizes them on a host whose history knows `launch_sd`
    (analysis.sweep.levelsize): a ci_pct interval, or with ci_pct None what a launch is worth; at
    most budget_s a level (None: the plan's default)."""
    known = None if launch_sd is None else history(launch_sd)
    rule = levelsize.sizing(ci_pct, budget_s, known, LOAD_S)
    return estimate.Measure(REPEATS, 1, None, None, rule.ci_pct, 8, rule.budget_s,
                            launch_cost_s=rule.launch_cost_s, launch_cv_pct=rule.launch_cv_pct)  # fmt: skip


def history(launch_sd: float) -> LaunchPrior:
    """The launch spread the seed host's history knows."""
    return LaunchPrior(cv_pct=launch_sd * 100.0, df=HISTORY_DF, source="bench", from_history=True)


def bench_levels(
    stopping: bool, m: estimate.Measure | None = None
) -> tuple[dict[int, float], dict[int, int]]:
    """One launch's benchmark seconds and the requests each level measures (both summed over
    workloads and repeats), by the sweep's own level arithmetic: levels that stop (`m`, else
    measure()) or every record."""
    m = (m or measure()) if stopping else estimate.Measure(REPEATS, 1, None, None, 0.0, 8, None)
    seconds, requests = dict.fromkeys(LEVELS, 0.0), dict.fromkeys(LEVELS, 0)
    for records, turns in WORKLOADS.values():
        for c in LEVELS:
            tps = BASE_TPS * c**SCALE
            level = estimate.Level(None, c, max(4 * c, records), turns, TOKENS)
            s = estimate.level_seconds(level, m, tps, CV)
            seconds[c] += REPEATS * s
            requests[c] += int(REPEATS * s * tps / TOKENS)
    return seconds, requests


def bench_s(stopping: bool, m: estimate.Measure | None = None) -> tuple[float, dict[int, int]]:
    """One launch's benchmark seconds, every level, and the requests each level measures."""
    seconds, requests = bench_levels(stopping, m)
    return sum(seconds.values()), requests


def draw(rng: np.random.Generator, t: pd.DataFrame, configs: list[str], requests: dict[int, int],
         launch_sd: float) -> pd.DataFrame:  # fmt: skip
    """One launch of each of `configs`: each repeat's log tok/s per level (a (config, repeat) index):
    the launch's effect N(0, launch sd), each repeat's mean over its share of the requests."""
    index = pd.MultiIndex.from_product([configs, range(1, REPEATS + 1)], names=["config", "repeat"])
    noise = np.array([CV / np.sqrt(requests[c] / REPEATS) for c in LEVELS])
    effect = np.repeat(rng.normal(0.0, launch_sd, len(configs)), REPEATS)[:, None]
    base = t.loc[index.get_level_values(0)].to_numpy()
    return pd.DataFrame(base + effect + rng.normal(0.0, 1.0, (len(index), len(LEVELS))) * noise,
                        index=index, columns=t.columns)  # fmt: skip


Launch = tuple[str, int, pd.DataFrame]  # config, launch, its draw


def step(launches: list[Launch], known: LaunchPrior) -> pd.DataFrame:
    """The report's step table (analysis.report.compare.step_table) of these launches, each recorded
    with the host's launch spread as the plan has every fact record it."""
    rows = [
        {"path": f"h/{cid}.launch{k}", "sweep_id": "seed", "host": "h", "engine": "sglang", "model": "m",
         "config_id": cid, "speculative": cid != "baseline",
         "steps": None if cid == "baseline" else int(cid[1:]), "env_profile": "default", "status": "ok",
         "started_at": float(n), "concurrency": c, "repeat": r, "duration_s": TOKENS / np.exp(v),
         "n_requests": 1, "n_errors": 0, "run_ok": True, "failed": False, "output_tokens": TOKENS,
         "fact_id": n, "run_index": r, "launch_index": k, "interfered": False,
         "launch_prior_cv_pct": known.cv_pct, "launch_prior_df": known.df}
        for n, (cid, k, seen) in enumerate(launches)
        for (_, r), row in seen.loc[[cid]].iterrows()
        for c, v in row.items()
    ]  # fmt: skip
    return step_table(frame(rows, RUN_COLUMNS))


def hand_loop(rng: np.random.Generator, t: pd.DataFrame, launch_sd: float) -> tuple[int, float, pd.Series]:
    """Each config once, every record, the highest mean: (launches, their benchmark seconds, the
    config chosen per level)."""
    full, requests = bench_s(False)
    seen = draw(rng, t, list(t.index), requests, launch_sd)
    return len(t), len(t) * full, seen.groupby(level="config").mean().idxmax()


def sweep(
    rng: np.random.Generator,
    t: pd.DataFrame,
    launch_sd: float,
    new: bool,
    confidence: float = launchprior.FINALIST_CONFIDENCE,
    finalists: bool = True,
    m: estimate.Measure | None = None,
) -> tuple[int, float, pd.Series]:
    """The sweep's own rule on a host whose history knows its launch spread: its order (the
    baseline again or not, analysis.sweep.launchprior.baseline_every), the finalists chosen on launch
    1's step table (analysis.running.prior, close calls at `confidence`; none with finalists=False,
    the sweep's -e finalists=false), each relaunched at its close calls' levels only, and the
    report's best per level over every launch; levels stopping as `m` says. new=False: main's rule
    before the prior (baseline_every 10, every 95% close call's best and rivals relaunched at every
    level, futile or not; speculative configs only). Returns (launches, their benchmark seconds,
    the config chosen per level)."""
    seconds, requests = bench_levels(True, m)
    known = history(launch_sd)
    every = launchprior.baseline_every(None if new else launchprior.BASELINE_EVERY, known)
    grid = [(cid, cid != "baseline") for cid in t.index]
    ordered, closing = order.schedule(grid, 1, int(rng.integers(2**31)), "h", every)
    launches = [(s["id"], s["launch"], draw(rng, t, [s["id"]], requests, launch_sd)) for s in ordered]
    spent = len(launches) * sum(seconds.values())
    first = step(launches, known)
    every = [(None, float(c)) for c in LEVELS]
    if not finalists:
        chosen = {}
    elif new:
        offered = launchprior.candidates(grid, bool(closing), known)
        chosen = prior.finalist_levels(first, offered, known, confidence)
    else:
        calls = close_calls(first, known, 0.95)
        chosen = dict.fromkeys(
            sorted({c for call in calls for c in [*call.best, *call.rivals]} - {"baseline"}), every
        )
    for cid, levels in [*chosen.items(), *((s["id"], every) for s in closing)]:
        k = 1 + sum(cid == c for c, _, _ in launches)
        at = [int(c) for _, c in levels]  # a finalist's relaunch measures its close calls' levels only
        launches.append((cid, k, draw(rng, t, [cid], requests, launch_sd)[at]))
        spent += sum(seconds[c] for c in at)
    final = step(launches, known)
    best = final[final["best"]].drop_duplicates("concurrency").set_index("concurrency")["config"]
    return len(launches), spent, best.reindex(list(LEVELS))


# (rng, truth, launch sd[, m=levels]) -> launches, their benchmark seconds, the config chosen per level
Strategy = Callable[..., tuple[int, float, pd.Series]]
STRATEGIES: dict[str, tuple[Strategy, bool]] = {
    "hand loop (6 launches, all records)": (hand_loop, False),
    "main: baseline again, close calls once": (partial(sweep, new=False), True),
    "95%: no baseline again, futile calls not": (partial(sweep, new=True, confidence=0.95), True),
    "80%: close and futile calls at 80% (default)": (partial(sweep, new=True), True),
    "one launch each: -e finalists=false": (partial(sweep, new=True, finalists=False), True),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--launch-sd", type=float, nargs="+", default=[0.005, 0.02, LAUNCH],
                        help="launch spreads to price (fractions), e.g. 0.005 0.02")  # fmt: skip
    parser.add_argument("--ci-pct", type=float,
                        help="the sweep rows' bench_ci_pct (default: a launch's worth)")  # fmt: skip
    parser.add_argument("--level-budget-s", type=float, help="the sweep rows' bench_level_budget_s")
    args = parser.parse_args(argv)
    t = truth()
    full, _ = bench_s(False)
    print(f"seed case: load {LOAD_S / 60:.1f} min, benchmark {full / 60:.1f} min per launch with every "
          f"record; {GPUS} GPUs; true best per level: {dict(t.idxmax())}")  # fmt: skip
    header = f"{'launch sd':>9}  {'strategy':<44} {'launches':>8} {'GPU h':>6} {'best':>8} {'within 1%':>10}"
    for launch_sd in sorted(set(args.launch_sd)):
        m = measure(args.ci_pct, args.level_budget_s, launch_sd)
        short, requests = bench_s(True, m)
        rule = (f"at a {m.ci_pct:g}% interval" if m.launch_cost_s is None
                else f"at what a launch is worth ({m.launch_cost_s:g} s, {m.launch_cv_pct:g}%)")  # fmt: skip
        print(f"\nlaunch sd {launch_sd:.1%}: the sweep's levels stop {rule} within {m.budget_s:g} s: "
              f"{short / 60:.1f} min per launch (requests per level {requests})")  # fmt: skip
        print(header)
        print("-" * len(header))
        for name, (strategy, stopping) in STRATEGIES.items():
            rng = np.random.default_rng(args.seed)
            launches, seconds, right, good = [], [], 0, 0
            for _ in range(args.trials):
                n, spent, chosen = strategy(rng, t, launch_sd, **({"m": m} if stopping else {}))
                launches.append(n)
                seconds.append(n * LOAD_S + spent)
                right += int(chosen.eq(t.idxmax()).sum())
                lost = t.max() - pd.Series({c: t.loc[chosen[c], c] for c in LEVELS})
                good += int(lost.le(np.log1p(INDIFFERENT)).sum())
            mean = float(np.mean(launches))
            hours = float(np.mean(seconds)) * GPUS / 3600
            print(
                f"{launch_sd:>8.1%}  {name:<44} {mean:>8.1f} {hours:>6.1f} "
                f"{right / (args.trials * len(LEVELS)):>8.1%} {good / (args.trials * len(LEVELS)):>10.1%}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
