"""What racing (-e race=true) saves, and what it risks, on sweeps simulated from real facts.

Not a test: numbers, not verdicts. Calibration: a sweep's facts (default: the H200 n-gram sweep in
../shared/gpu-run/captured/h200-ngram, baseline and s1/s2/s4 at concurrency 1, 4 and 16, 3
repeats each). Each config's true tok/s at a level is its median there; a repeat's noise is the
pooled within-launch spread of log decode tok/s of that sweep (one CV for all); each launch adds a
launch effect (log-normal, sd given per row: 0 = launches as steady as repeats, 5% and 10% = the
kind of launch-to-launch moves issue 24 reports). A launch takes the mean time of the facts' launches
and holds as many GPUs as their hosts had.

Each trial runs a sweep of `launches` rounds in a seeded random order (analysis.sweep.order); with
racing, a speculative config's launch k >= 2 is skipped when analysis.running.race.raced_out says so
from the launches so far (the sweep's own rule, on the report's step table of them). Columns:
launches planned and run (median), saved (share of launches), GPU-min saved per sweep, and the
risk: best lost = share of trials where a config that is truly the best at some level was raced
out; winner same = the config with the highest median at each level is the same as the full
sweep's (the same draws, nothing raced).

    .venv/bin/python bench/race.py [--facts DIR] [--trials 100] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import statistics
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.report.compare import step_table
from analysis.running import race
from analysis.sweep import order

# The shared folder beside the repository (as CI lays it): the captured H200 sweep.
DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "gpu-run" / "captured" / "h200-ngram" / "localhost"


def calibrate(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame, float, float, int]:
    """(true tok/s per config and level, a run row per config and level to draw repeats from,
    within-launch sd of log tok/s, launch seconds, GPUs)."""
    found = race.facts(folder)
    data = race.runs(found)
    data = data[data["run_ok"] & data["decode_tps"].gt(0)].astype({"config_id": "object"})
    keys = ["config_id", "concurrency"]
    spread = data.assign(log=np.log(data["decode_tps"])).groupby(keys)["log"].var()
    truth = data.groupby(keys)["decode_tps"].median().reset_index()
    template = data.drop_duplicates(keys).reset_index(drop=True)
    seconds = statistics.mean(f.timings.finished_at - f.timings.started_at for f in found)
    gpus = max(len(f.host_facts.gpus) for f in found)
    return truth, template, float(np.sqrt(spread.mean())), seconds, gpus


def simulate(
    truth: pd.DataFrame, template: pd.DataFrame, noise: float, launch_sd: float, launches: int,
    repeats: int, rng: np.random.Generator, seed: int,
) -> tuple[int, pd.DataFrame, pd.DataFrame, set[str]]:  # fmt: skip
    """One sweep measured in full, then replayed with racing (the same draws, raced launches left
    out): (launches run with racing, its repeats, every repeat of the full sweep, the raced configs).
    A repeat is a copy of the config's real run row with a drawn tok/s, so racing judges it on the
    report's own table."""
    configs = [(c, c != "baseline") for c in sorted(truth["config_id"].unique())]
    ordered, _ = order.schedule(configs, launches, seed, "sim", 0)
    drawn: dict[tuple[str, int], pd.DataFrame] = {}
    for at, slot in enumerate(ordered):
        cid, k = slot["id"], slot["launch"]
        effect = rng.normal(0.0, launch_sd)
        mine = template[template["config_id"] == cid]
        level = mine.loc[mine.index.repeat(repeats)].reset_index(drop=True)
        tps = level["decode_tps"] * np.exp(effect + rng.normal(0.0, noise, len(level)))
        # The same tokens at the drawn speed: the window shrinks as the rate grows, so that the
        # objective the step table ranks on (throughput by default) moves with the draw.
        drawn[cid, k] = level.assign(
            decode_tps=tps, duration_s=level["duration_s"] * level["decode_tps"] / tps, launch_index=k,
            repeat=np.tile(range(repeats), len(mine)),
            run_index=range(len(level)), started_at=float(at),
        )  # fmt: skip
    parts: list[pd.DataFrame] = []
    out: set[str] = set()
    for slot in ordered:
        cid, k = slot["id"], slot["launch"]
        if cid in out:
            continue
        if slot["speculative"] and k >= 2 and race.raced_out(step_table(pd.concat(parts)), cid):
            out.add(cid)
            continue
        parts.append(drawn[cid, k])
    return len(parts), pd.concat(parts), pd.concat(drawn.values()), out


def winners(data: pd.DataFrame) -> dict[int, str]:
    """The config with the highest median at each level."""
    medians = data.groupby(["concurrency", "config_id"])["decode_tps"].median().reset_index()
    return {
        int(c): str(g.loc[g["decode_tps"].idxmax(), "config_id"]) for c, g in medians.groupby("concurrency")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=Path, default=DEFAULT)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    truth, template, noise, seconds, gpus = calibrate(args.facts)
    best = set(winners(truth).values())
    n_configs, n_levels = truth["config_id"].nunique(), truth["concurrency"].nunique()
    print(f"calibration: {args.facts}: {n_configs} configs x {n_levels} levels, "
          f"within-launch CV {noise * 100:.1f}%, {seconds:.0f} s/launch, {gpus} GPU(s); "
          f"true best: {', '.join(sorted(best))}")  # fmt: skip
    header = (
        f"{'launches':>8} {'launch sd':>9} {'planned':>7} {'run':>5} {'saved':>6} {'GPU-min saved':>13} "
        f"{'best lost':>9} {'winner same':>11}"
    )
    print(header)
    print("-" * len(header))
    for launches in (3, 5):
        for launch_sd in (0.0, 0.05, 0.10):
            rng = np.random.default_rng(args.seed)
            seeds = random.Random(args.seed)
            runs, lost, same = [], 0, 0
            planned = launches * truth["config_id"].nunique()
            for _ in range(args.trials):
                ran, raced_data, full_data, out = simulate(
                    truth, template, noise, launch_sd, launches, 3, rng, seeds.randrange(2**31)
                )
                runs.append(ran)
                lost += bool(out & best)
                same += winners(raced_data) == winners(full_data)
            saved = planned - statistics.median(runs)
            gpu_min = (planned - statistics.mean(runs)) * seconds * gpus / 60
            print(f"{launches:>8} {launch_sd * 100:>8.0f}% {planned:>7} {statistics.median(runs):>5.0f} "
                  f"{saved / planned * 100:>5.0f}% {gpu_min:>13.2f} {lost / args.trials * 100:>8.1f}% "
                  f"{same / args.trials * 100:>10.1f}%")  # fmt: skip


if __name__ == "__main__":
    main()
