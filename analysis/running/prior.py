"""The launch-to-launch spread a host already knows, and which configs a one-launch sweep relaunches.

A one-launch verdict needs a launch spread it did not measure: a fresh server, another moment,
whatever else ran (analysis.report.launches). The host's earlier sweeps measured it wherever they
launched a config twice (the baseline again at the end, finalists, launches >= 2): their launch
variances (launch_tau2, pooled over a sweep's configs and levels) are pooled here by degrees of
freedom, newest sweeps of the same host, engine and model first. Where no earlier sweep has one,
the prior is the stated assumption analysis.report.compare.LAUNCH_CV_PRIOR (25%, the demo
machine's), and the finalists are chosen as before it existed.

Finalists with a known spread (Kalibera & Jones's point: spend repetitions where the variance
is): a level's decision is close when a rival's 80% interval against the best, each side allowing
that spread, holds 0 (analysis.sweep.launchprior.FINALIST_CONFIDENCE); then the best and those
rivals are launched once more, unless the nearest rival is so close that one more launch of each
could not tell them apart at that spread and confidence (futility: too close to call at this
host's spread, said, not relaunched). A level where every rival is clearly behind is decided by
its one launch, and nothing is relaunched for it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.facts.schema import Fact
from analysis.report.closecall import Level, close_calls
from analysis.running import race
from analysis.sweep.client import level_name
from analysis.sweep.launchprior import ASSUMED, FINALIST_CONFIDENCE, LaunchPrior, tau2

SWEEPS_READ = 10  # earlier sweeps read, newest first (as analysis.sweep.estimate)


def from_history(results_dir: Path, host: str, engine: str, model: str | None, sweep_id: str) -> LaunchPrior:
    """The launch spread of `host` serving `model` on `engine`, pooled over its newest earlier
    sweeps in `results_dir` that measured one (this sweep's own left out); ASSUMED where none did."""
    sweeps = [p.parent for p in results_dir.glob("*/sweep.json") if p.parent.name != sweep_id]
    sweeps.sort(key=lambda d: (d / "sweep.json").stat().st_mtime, reverse=True)
    ss, df, used = 0.0, 0.0, []
    close, raced = [0, 0], [0, 0]
    # The newest that measured something: a plan-only run's folder has no fact and takes no place.
    for folder in [d for d in sweeps if any(d.glob("*/*.json"))][:SWEEPS_READ]:
        mine = [
            f for f in race.facts(folder / host)
            if f.engine.name == engine and (model is None or f.engine.model == model)
        ]  # fmt: skip
        found = [f for f in mine if f.status == "ok"]
        if not found:
            continue
        _count_odds(mine, _settings(folder), close, raced)
        step = race.table(found, sweep_dir=folder)
        spread = step[step["launch_df"].gt(0) & step["launch_cv_pct"].notna()]
        if spread.empty:
            continue
        first = spread.iloc[0]  # one pooled value per (sweep, host, engine, model)
        ss += tau2(float(first["launch_cv_pct"])) * float(first["launch_df"])
        df += float(first["launch_df"])
        used.append(folder.name)
    if not df:
        return ASSUMED
    cv = math.sqrt(math.expm1(ss / df)) * 100.0
    return LaunchPrior(
        cv_pct=cv,
        df=df,
        source=f"{len(used)} earlier sweep(s) on {host} ({', '.join(used)}), {df:.0f} df",
        from_history=True,
        close_calls=(close[0], close[1]) if close[1] else None,
        raced=(raced[0], raced[1]) if raced[1] else None,
    )


def _settings(folder: Path) -> dict[str, Any]:
    """A sweep's settings as its sweep.json holds them; {} where it does not say."""
    try:
        settings = json.loads((folder / "sweep.json").read_bytes()).get("settings")
    except (OSError, ValueError, AttributeError):
        return {}
    return settings if isinstance(settings, dict) else {}


def _count_odds(facts: list[Fact], settings: dict[str, Any], close: list[int], raced: list[int]) -> None:
    """Add one earlier sweep's outcomes to [happened, of]: `close`, whether its finalists, judged
    at a spread from history, relaunched anything (a close call); `raced`, how many of its
    configs' later launches racing left out."""
    launches = settings.get("launches")
    if not isinstance(launches, int):
        return
    judged = settings.get("finalists") and all(f.launch_prior and f.launch_prior.from_history for f in facts)
    if judged:
        close[1] += 1
        close[0] += any(f.config.speculative and f.launch_index > launches for f in facts)
    if settings.get("race"):
        later = [f for f in facts if f.config.speculative and 2 <= f.launch_index <= launches]
        raced[0] += sum(f.raced_out is not None for f in later)
        raced[1] += len(later)


def finalist_levels(
    step: pd.DataFrame,
    candidates: Collection[str],
    prior: LaunchPrior | None,
    confidence: float = FINALIST_CONFIDENCE,
) -> dict[str, list[Level]]:
    """The candidates to launch once more, in order, each with the levels its relaunch measures.
    With a spread from history: the best and its rivals at each level of a close call that one
    more launch of each could resolve, at those levels; none at a level every rival clearly lost or
    one too close to call (close_calls). Without one: the best at every level and every config
    within noise of it, where it is (race.finalist_levels, the rule before the prior)."""
    if prior is None or not prior.from_history:
        return race.finalist_levels(step, candidates)
    chosen: dict[str, list[Level]] = {}
    for call in close_calls(step, prior, confidence):
        for config_id in [] if call.futile else [*call.best, *call.rivals]:
            chosen.setdefault(config_id, []).append((call.workload, call.concurrency))
    return {c: chosen[c] for c in candidates if c in chosen}


def finalists(
    step: pd.DataFrame,
    candidates: Collection[str],
    prior: LaunchPrior | None,
    confidence: float = FINALIST_CONFIDENCE,
) -> list[str]:
    """The candidates to launch once more, in order (finalist_levels)."""
    return list(finalist_levels(step, candidates, prior, confidence))


def only(step: pd.DataFrame, levels: Collection[Level]) -> list[str]:
    """A relaunch's levels as the client's --only names them (analysis.sweep.client.level_name); none
    where they are every level the step table measured: the relaunch measures them all."""
    if set(race.measured_levels(step)) <= set(levels):
        return []
    return [level_name(workload, concurrency) for workload, concurrency in levels]
