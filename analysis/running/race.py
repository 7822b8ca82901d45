"""Racing and finalists: which configs the launches so far already decide, from one host's facts.

F-race (Birattari et al., irace) drops a candidate as soon as it is significantly worse than the
best, and spends the saved evaluations on the survivors. Here a candidate is a config, an
evaluation a launch, and "significantly worse" is the step table's own word (one owner of the
rule, analysis.report.compare): at every concurrency level, the table's interval of the config's
tok/s over the best config's (vs_best_ci: launches as a random effect, the launch-spread prior
where no config was launched twice) lies entirely below 0. So a config is never raced out on a
rule the report would not back. The comparison is with the best directly, not two intervals
against the baseline: both would share the baseline's noise, and the best's own estimate is the
one most flattered by noise (the winner's curse). Without an interval nothing is dropped.

Finalists are the survivors when the sweep ends: the best at some level and every config within
noise of it there (its interval against the best holds 0, or there is none). They are launched once
more before a winner is named.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import objectives
from analysis.facts.load import REQUEST_COLUMNS, RUN_COLUMNS, frame
from analysis.facts.rows import request_columns, run_rows
from analysis.facts.schema import Fact, decode_fact, to_dict
from analysis.report.closecall import Level, level_text
from analysis.report.compare import GROUP, TABLE_COLUMNS, step_table
from analysis.report.sla import Sla, with_run_goodput
from analysis.sweep.client import level_of
from analysis.sweep.order import fact_name


def facts(host_dir: Path) -> list[Fact]:
    """Every readable fact of one host's folder."""
    found = []
    for path in sorted(host_dir.glob("*.json")):
        try:
            found.append(decode_fact(path.read_bytes()))
        except (OSError, ValueError):
            continue
    return found


def runs(found: Iterable[Fact], max_launch: int | None = None) -> pd.DataFrame:
    """The report's run rows of these facts (launches up to `max_launch`)."""
    rows = [
        row
        for f in found
        if max_launch is None or f.launch_index <= max_launch
        for row in run_rows(f"{f.host}/{f.config.id}.launch{f.launch_index}", f)
    ]
    return frame(rows, RUN_COLUMNS)


def ranking(sweep_dir: Path) -> tuple[objectives.Objective, Sla]:
    """The objective and SLOs the sweep ranks on (its sweep.json's settings; the defaults where an
    older sweep named none), so that racing drops configs on the rule its report will print."""
    try:
        settings = json.loads((sweep_dir / "sweep.json").read_bytes()).get("settings") or {}
    except (OSError, ValueError):
        settings = {}
    sla = Sla(settings.get("sla_ttft_p99_ms"), settings.get("sla_itl_p99_ms"))
    return objectives.get(settings.get("objective")), sla


def table(
    found: Iterable[Fact], max_launch: int | None = None, sweep_dir: Path | None = None
) -> pd.DataFrame:
    """The step table of these facts (launches up to `max_launch`), the one the report prints, on
    the objective of the sweep in `sweep_dir` (None: the default)."""
    found = [f for f in found if max_launch is None or f.launch_index <= max_launch]
    measured = runs(found)
    # Nothing measured yet: an empty table (step_table needs a row to group).
    if not len(measured):
        return pd.DataFrame(columns=TABLE_COLUMNS)
    objective, sla = ranking(sweep_dir) if sweep_dir else (objectives.DEFAULT, Sla())
    if objective.needs_sla:  # goodput counts each run's requests within the SLOs
        names = [f"{f.host}/{f.config.id}.launch{f.launch_index}" for f in found]
        ids = {n: i for i, n in enumerate(names)}
        columns = [request_columns(n, f) for n, f in zip(names, found, strict=True)]
        requests = frame({c: [v for part in columns for v in part[c]] for c in columns[0]}, REQUEST_COLUMNS)
        requests = requests.assign(fact_id=requests["path"].astype(str).map(ids))
        measured = with_run_goodput(
            measured.assign(fact_id=measured["path"].astype(str).map(ids)), requests, sla
        )
    return step_table(measured, objective=objective)


def _measured(step: pd.DataFrame) -> pd.DataFrame:
    """The rows that measured the objective (a config's failure or skip rows say nothing about it)."""
    return step[step["score"].notna() & step["concurrency"].notna()]


def raced_out(step: pd.DataFrame, config_id: str) -> str | None:
    """Why `config_id` stops here (the table's interval against the best is below 0 at every level
    it was measured at), or None while it may still win somewhere."""
    mine = _measured(step)
    mine = mine[mine["config"] == config_id]
    if mine.empty or mine["best"].any() or not (mine["vs_best_ci_hi"] < 0).all():
        return None
    best = _measured(step)
    best = best.loc[best["best"], [*GROUP, "config"]].drop_duplicates(GROUP)
    mine = mine.merge(best.rename(columns={"config": "_best"}), on=GROUP, how="left")
    return "; ".join(
        f"c={c:g}: {p:+.1f}% [{lo:+.1f}, {hi:+.1f}] vs {b}"
        for c, p, lo, hi, b in mine[
            ["concurrency", "vs_best_pct", "vs_best_ci_lo", "vs_best_ci_hi", "_best"]
        ].itertuples(index=False)
    )


def levels(rows: pd.DataFrame) -> list[Level]:
    """The levels of these step table rows, in their order, each once."""
    workload = [w if isinstance(w, str) else None for w in rows["workload"]]
    return list(dict.fromkeys(zip(workload, rows["concurrency"].astype(float), strict=True)))


def measured_levels(step: pd.DataFrame) -> list[Level]:
    """Every level the step table measured the objective at."""
    return levels(_measured(step))


def finalist_levels(step: pd.DataFrame, candidates: Collection[str]) -> dict[str, list[Level]]:
    """The candidates that are best at some level or within noise of the best there, in order, each
    with those levels."""
    rows = _measured(step)
    alive = rows[rows["best"] | ~(rows["vs_best_ci_hi"] < 0)]
    return {c: levels(alive[alive["config"].eq(c)]) for c in candidates if alive["config"].eq(c).any()}


def finalists(step: pd.DataFrame, candidates: Collection[str]) -> list[str]:
    """The candidates that are best at some level or within noise of the best there, in order."""
    return list(finalist_levels(step, candidates))


def skipped_fact(previous: Fact, launch: int, reason: str, now: float) -> dict:
    """The record of a launch racing did not run: the config's last fact, as `skipped`, without numbers."""
    doc = to_dict(previous)
    doc.update(
        launch_index=launch, status="skipped", raced_out=reason, runs=[], benchmark=None, failure=None,
        server_info={}, timings={"started_at": now, "finished_at": now},
    )  # fmt: skip
    return doc


def saved(sweep_dir: Path, hosts: Iterable[str]) -> str:
    """The end-of-sweep line: launches racing did not run and about how long they would have taken."""
    skipped, seconds, gpu_seconds = [], 0.0, 0.0
    for host in hosts:
        found = facts(sweep_dir / host)
        took: dict[str, list[float]] = {}
        for f in found:
            if f.status == "ok":
                took.setdefault(f.config.id, []).append(f.timings.finished_at - f.timings.started_at)
        for f in found:
            if f.raced_out:
                launch_s = float(np.mean(took.get(f.config.id) or [0.0]))
                skipped.append(f"{host}/{f.config.id}.launch{f.launch_index}")
                seconds += launch_s
                gpu_seconds += launch_s * len(f.host_facts.gpus)
    if not skipped:
        return ""
    return (
        f"racing: {len(skipped)} launch(es) not run ({', '.join(skipped)}), saving about "
        f"{seconds / 60:.1f} launch-minutes, {gpu_seconds / 60:.1f} GPU-minutes"
    )


def previous_fact(host_dir: Path, config_id: str) -> Fact | None:
    """The config's latest fact on this host (the one a skipped launch copies)."""
    mine = [f for f in facts(host_dir) if f.config.id == config_id]
    return max(mine, key=lambda f: f.launch_index) if mine else None


def relaunched(
    sweep_dir: Path, hosts: Iterable[str], launches: int, closing: Mapping[str, Collection[str]] | None = None
) -> str:
    """The end-of-sweep line naming the finalists' extra launches (after launch `launches`, or a
    step search's launch 2 of a probe), each with the levels it measured where not every one; the
    baseline's too where `closing` (per host, the plan's again-launches) does not name it: there the
    host's history spared it its again-launch and a close call relaunched it. '' when there were none."""
    names = [
        f"{host}/{name}" + (f" (at {', '.join(level_text(level_of(o)) for o in only)})" if only else "")
        for host in hosts
        for f in facts(sweep_dir / host)
        for name, only in [(fact_name(f.config.id, f.launch_index), f.benchmark and f.benchmark.only)]
        if f.launch_index > launches
        and f.raced_out is None
        and (f.config.speculative or (closing is not None and name not in closing.get(host, ())))
    ]
    if not names:
        return ""
    return f"finalists launched once more before the winner was named: {', '.join(sorted(names))}"
