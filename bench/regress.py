"""How soon and how reliably `regress` finds a step change in nightly tok/s, and names its cause.

Not a test: numbers, not verdicts. Each simulated cell has 30 nights of a speculative config:
accept length x verify steps per second, with lognormal night-to-night noise whose CV on tok/s is
1-3% (ACCEPT_SHARE of its variance in accept length, the rest in step time; step time derived
from tok/s and accept length, as on llama.cpp or SGLang without recorded step times). A cell
steps down by 3, 5 or 8% at a random night (from night 9 to 28, so 8 nights come before it and
at least 2 after), half of them through accept length and half through step time, or not at all.
The nightly is replayed: every night from the 6th on, the cells of a fleet are judged together on
the nights up to it, as `python -m analysis regress` judges a sweep's cells (analysis.nightly.judge,
the same code, with the noise prior fitted on the fleet that night), once per rule. A fleet is the
cells of one CV (every shift and none), all of them ("mixed CVs": cells that disagree on their
noise, so that each keeps more of its own), or CV 2% cells whose accept length is steady ("accept
length steady": all of the noise in step time, as with greedy decoding; testing tok/s's factors
each against its own noise gains least there).
(From the 6th night on the default rule is the change points and the recent-drop test; the
window rule that also guards a cell's first five nights is not in the table. "own noise" is the
default rule with `noise: own`, each cell's variance its own, as before the fleet's was shared;
"change point only" is that without the recent-drop test.)

Columns: found: flagged `regressed` on the night of the shift or later (within the 30 nights);
by 2nd / by 3rd night: flagged while at most 2 / 3 nights at the new level were measured; nights
to detect: median nights at the new level when first flagged (1 = the night of the shift);
changed_at: the flagged night names the night of the shift; component: the attribution
(acceptance / step_time) is the simulated cause; FP per 100: nights flagged `regressed` before any
shift, per 100 such cell-nights.

A second table trades one for the other: the default rule at several `alpha` / `recent_alpha`
(`specsweep_nightly` in group_vars, `regress --alpha --recent-alpha`) on a fleet of CV 2% cells
with a 5% shift or none, beside references: how often a test of the mean of tok/s over the first
2 (3) nights at the new level against an exactly known old level finds the shift at the same
false-positive rate (noise known too, so no rule on tok/s alone that must estimate both from the
nights themselves does better with one look; the recent-drop test can, as it also tests the two
factors of tok/s, each against its own noise).

    .venv/bin/python bench/regress.py [--cells 200] [--seed 1]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.nightly.judge import Nights, fleet_noise, judge
from analysis.nightly.settings import Settings

NIGHTS = 30
FIRST_JUDGED = 5  # the 6th night: the window rule has its 5 previous nights
SHIFT_NIGHTS = (8, NIGHTS - 2)  # a shift lands on one of these (0-based, end exclusive)
ACCEPT_SHARE = 0.3  # of the log tok/s variance; the rest is step-time noise
ACCEPT_LENGTH, STEP_MS = 2.5, 20.0
CVS = (0.01, 0.02, 0.03)
SHIFTS = (0.0, 0.03, 0.05, 0.08)
RULES = {
    "window (old)": Settings(rule="window"),
    "change point only": Settings(recent_alpha=1e-12, noise="own"),
    "change point + recent drop, own noise": Settings(noise="own"),
    "default: change point + recent drop, shared noise": Settings(),
}
MIXED = "default, fleet of mixed CVs"
STEADY, STEADY_CV = "default, accept length steady", 0.02
CURVE_CV, CURVE_SHIFT = 0.02, 0.05
# (alpha, recent_alpha) pairs; the defaults are Settings()'s.
CURVE_ALPHAS = ((0.0005, 0.002), (0.001, 0.003), (0.001, 0.005), (0.001, 0.007), (0.0005, 0.01),
                (0.003, 0.01), (0.01, 0.02), (0.03, 0.05))  # fmt: skip


def history(
    cv: float, shift: float, cause: str, at: int, rng: np.random.Generator, accept_share: float
) -> Nights:
    """One cell's 30 nights, stepping down by `shift` at night `at` through `cause`; `accept_share`
    of the variance of log tok/s in accept length."""
    accept = ACCEPT_LENGTH * np.exp(rng.normal(0.0, cv * np.sqrt(accept_share), NIGHTS))
    step = STEP_MS * np.exp(rng.normal(0.0, cv * np.sqrt(1.0 - accept_share), NIGHTS))
    if cause == "acceptance":
        accept[at:] *= 1.0 - shift
    else:
        step[at:] /= 1.0 - shift
    tps = accept / step * 1000.0
    none = np.full(NIGHTS, np.nan)
    return Nights(tps, accept, none, accept / tps * 1000.0, np.ones(NIGHTS, dtype=bool))


def replay(cells: list[Nights], ats: list[int], s: Settings) -> list[dict[str, Any]]:
    """Judge every night from FIRST_JUDGED on, the fleet's cells together: each cell's false alarms
    before its shift (`ats`), and its first flag after it."""
    seen = [{"nights": np.nan, "component": None, "changed_at": False, "false_alarms": 0, "judged_before": 0}
            for _ in cells]  # fmt: skip
    for night in range(FIRST_JUDGED, NIGHTS):
        upto = [
            dataclasses.replace(
                cell, **{f.name: getattr(cell, f.name)[: night + 1] for f in dataclasses.fields(cell)}
            )
            for cell in cells
        ]
        priors = fleet_noise(upto, s)
        for outcome, cell, at in zip(seen, upto, ats, strict=True):
            if not np.isnan(outcome["nights"]):
                continue
            v = judge(cell, s, priors)
            if night < at:
                outcome["judged_before"] += 1
                outcome["false_alarms"] += v.verdict == "regressed"
            elif v.verdict == "regressed":
                outcome.update(nights=night - at + 1, component=v.component, changed_at=v.changed_at == at)
    return seen


def fleet(
    cv: float,
    shifts: tuple[float, ...],
    cells: int,
    rng: np.random.Generator,
    accept_share: float = ACCEPT_SHARE,
) -> pd.DataFrame:
    """`cells` simulated cells per shift at one CV: cv, shift, cause, at and the Nights."""
    rows = []
    for shift in shifts:
        for _ in range(cells):
            at = int(rng.integers(*SHIFT_NIGHTS)) if shift else NIGHTS
            cause = str(rng.choice(["acceptance", "step_time"]))
            rows.append({"cv": cv, "shift": shift, "cause": cause, "at": at,
                         "cell": history(cv, shift, cause, at, rng, accept_share)})  # fmt: skip
    return pd.DataFrame(rows)


def judged(cells: pd.DataFrame, rule: str, s: Settings) -> pd.DataFrame:
    """The cells with what the replay of `rule` saw of each."""
    seen = replay(list(cells["cell"]), list(cells["at"]), s)
    return cells.drop(columns="cell").assign(rule=rule).reset_index(drop=True).join(pd.DataFrame(seen))


def simulate(cells: int, seed: int) -> pd.DataFrame:
    """One row per (cell, rule): what the replay saw."""
    rng = np.random.default_rng(seed)
    fleets = [fleet(cv, SHIFTS, cells, rng) for cv in CVS]
    runs = [judged(f, rule, s) for f in fleets for rule, s in RULES.items()]
    runs.append(judged(pd.concat(fleets, ignore_index=True), MIXED, Settings()))
    runs.append(judged(fleet(STEADY_CV, SHIFTS, cells, rng, accept_share=0.0), STEADY, Settings()))
    return pd.concat(runs, ignore_index=True)


def table(runs: pd.DataFrame) -> pd.DataFrame:
    """The printed table: one row per (CV, shift, rule)."""
    shifted = runs["shift"] > 0
    runs = runs.assign(
        found=shifted & runs["nights"].notna(),
        by2=shifted & (runs["nights"] <= 2),
        by3=shifted & (runs["nights"] <= 3),
        right=runs["component"] == runs["cause"],
    )
    out = runs.groupby(["cv", "shift", "rule"], sort=False).agg(
        cells=("found", "size"), found=("found", "mean"), by2=("by2", "mean"), by3=("by3", "mean"),
        nights=("nights", "median"), false_alarms=("false_alarms", "sum"),
        judged=("judged_before", "sum"), n_found=("found", "sum"),
    )  # fmt: skip
    found = runs[runs["found"]].groupby(["cv", "shift", "rule"], sort=False)
    out["changed_at"] = found["changed_at"].mean()
    out["component"] = found["right"].mean()
    out["fp_per_100"] = 100.0 * out["false_alarms"] / out["judged"]
    return out.reset_index()


def markdown(t: pd.DataFrame) -> str:
    """The table as Markdown (rates in %, a dash where there is nothing to rate)."""

    def pct(v: float) -> str:
        return "–" if pd.isna(v) else f"{100.0 * v:.0f}%"

    header = ["CV", "shift", "rule", "cells", "found", "by 2nd night", "by 3rd night", "nights to detect",
              "changed_at right", "component right", "FP per 100 cell-nights"]  # fmt: skip
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in t.itertuples(index=False):
        shifted = r.shift > 0
        cells = [
            f"{r.cv:.0%}", f"{r.shift:.0%}" if shifted else "none", r.rule, str(r.cells),
            pct(r.found) if shifted else "–", pct(r.by2) if shifted else "–",
            pct(r.by3) if shifted else "–", "–" if pd.isna(r.nights) else f"{r.nights:g}",
            pct(r.changed_at), pct(r.component), f"{r.fp_per_100:.2f}",
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def curve(cells: int, seed: int) -> pd.DataFrame:
    """Per (alpha, recent_alpha): detection of a CURVE_SHIFT step at CURVE_CV, false alarms, references."""
    sample = fleet(CURVE_CV, (0.0, CURVE_SHIFT), cells, np.random.default_rng(seed))
    runs = pd.concat(
        [judged(sample, f"{a:g} / {r:g}", Settings(alpha=a, recent_alpha=r)) for a, r in CURVE_ALPHAS],
        ignore_index=True,
    )
    runs["alpha"] = pd.Categorical(runs["rule"], categories=runs["rule"].unique())  # in CURVE_ALPHAS order
    shifted = runs[runs["shift"] > 0]
    by = shifted.groupby("alpha", observed=True)["nights"]
    totals = runs.groupby("alpha", observed=True)[["false_alarms", "judged_before"]].sum()
    out = pd.DataFrame(
        {
            "by2": by.apply(lambda n: (n <= 2).mean()),
            "by3": by.apply(lambda n: (n <= 3).mean()),
            "found": by.apply(lambda n: n.notna().mean()),
            "fp_per_100": 100.0 * totals["false_alarms"] / totals["judged_before"],
        }
    )
    normal, step = statistics.NormalDist(), -math.log1p(-CURVE_SHIFT)
    for nights in (2, 3):
        out[f"reference{nights}"] = [
            normal.cdf(step / (CURVE_CV / math.sqrt(nights)) - normal.inv_cdf(1.0 - max(fp, 1e-3) / 100.0))
            for fp in out["fp_per_100"]
        ]
    return out.reset_index()


def curve_markdown(c: pd.DataFrame) -> str:
    """The alpha / recent_alpha table as Markdown."""
    header = ["alpha / recent_alpha", "found", "by 2nd night", "by 3rd night", "FP per 100 cell-nights",
              "reference: 2-night mean of tok/s at that FP", "reference: 3-night mean"]  # fmt: skip
    lines = [
        f"\nthe default rule (shared noise) at CV {CURVE_CV:.0%}, a {CURVE_SHIFT:.0%} shift,"
        " by alpha / recent_alpha:",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for r in c.itertuples(index=False):
        cells = [str(r.alpha), f"{r.found:.0%}", f"{r.by2:.0%}", f"{r.by3:.0%}", f"{r.fp_per_100:.2f}",
                 f"{r.reference2:.0%}", f"{r.reference3:.0%}"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    """Simulate, replay and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=200, help="cells per (CV, shift)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(markdown(table(simulate(args.cells, args.seed))))
    print(curve_markdown(curve(args.cells, args.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
