"""Close calls: the levels of a step table whose one-launch decision a host's launch spread leaves
open, and those too close to call at that spread (analysis.running.prior relaunches the others'
best and rivals; the report and the run say which were too close).

A level is close where some rival's interval against the best (vs_best_ci, the verdict's own,
analysis.report.compare), narrowed to FINALIST_CONFIDENCE (80%, analysis.sweep.launchprior),
holds 0. It is futile to relaunch where the nearest rival is closer than FINALIST_LAUNCHES
launches of each could tell apart at that spread and confidence (the half-width of the difference
of their means, analysis.sweep.launchprior.close_gap_pct): another launch would leave it within
noise, so the launch is not made and the level is said to be too close to call. One confidence for
both: a relaunch is made where it can settle the question at the confidence that raised it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from analysis.report.compare import GROUP
from analysis.sweep.launchprior import (
    FINALIST_CONFIDENCE,
    FINALIST_LAUNCHES,
    LaunchPrior,
    close_gap_pct,
    narrowing,
)

Level = tuple[str | None, float]  # a step table row's (workload, concurrency); None: the one prompt set


def level_text(level: Level) -> str:
    """A level in the run's and the report's words: "c=4 chat", "c=1" of the one prompt set."""
    workload, concurrency = level
    return f"c={concurrency:g} {workload or ''}".rstrip()


class Call(NamedTuple):
    """A level whose one-launch decision is close at the host's spread."""

    level: str  # "c=16" (and its workload)
    workload: str | None  # None: the one prompt set
    concurrency: float
    best: list[str]
    rivals: list[str]
    gap_pct: float  # how far behind the best its nearest rival is, %
    futile: bool  # the finalists' relaunch could not resolve that gap at this spread


def close_calls(
    step: pd.DataFrame, prior: LaunchPrior, confidence: float = FINALIST_CONFIDENCE
) -> list[Call]:
    """The levels where some rival's interval against the best at `confidence` holds 0 at the host's
    spread; futile where the nearest rival is closer than FINALIST_LAUNCHES launches of each could
    tell apart at that confidence."""
    rows = step[step["score"].notna() & step["concurrency"].notna()]
    # The 95% upper end, narrowed in log space (where the interval is symmetric).
    point = np.log1p(rows["vs_best_pct"] / 100.0)
    upper = point + (np.log1p(rows["vs_best_ci_hi"] / 100.0) - point) * narrowing(confidence)
    found = []
    for _, level in rows.groupby(GROUP, dropna=False, sort=False):
        rivals = level[~level["best"] & ~(upper[level.index] < 0)]
        if rivals.empty:
            continue
        gap = -float(rivals["vs_best_pct"].max())
        first = level.iloc[0]
        workload = first["workload"] if isinstance(first["workload"], str) else None
        at: Level = (workload, float(first["concurrency"]))
        futile = gap < close_gap_pct(prior, FINALIST_LAUNCHES, confidence)
        best, rival = [*level.loc[level["best"], "config"]], [*rivals["config"]]
        found.append(Call(level_text(at), *at, best, rival, gap, futile))
    return found


def too_close(step: pd.DataFrame, prior: LaunchPrior) -> list[str]:
    """The report's and the run's words for each close call not relaunched: too close to call."""
    return [
        f"{call.level}: {', '.join([*call.best, *call.rivals])} too close to call at this host's spread "
        f"({call.gap_pct:.1f}% apart; {FINALIST_LAUNCHES} launches of each resolve "
        f"{close_gap_pct(prior, FINALIST_LAUNCHES, FINALIST_CONFIDENCE):.1f}% or more at "
        f"{FINALIST_CONFIDENCE:.0%})"
        for call in close_calls(step, prior)
        if call.futile
    ]
