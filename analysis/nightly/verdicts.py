"""The verdict table of one night: every cell it measured (or failed to), judged on its history.

A cell is (host, engine, model, config, concurrency); its nights are the sweeps of the history in
start order, each night's value the median of its completed runs. The change-point rule reads a
cell's nights across engine versions (an upgrade is a common cause of a regression, and the
provenance diff names it); the window rule, as before, only nights of the latest night's version.
Cells measured in the previous `window` sweeps but absent from this one are listed as missing, or
failed when the config failed before measuring anything.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from analysis import objectives
from analysis.nightly import judge, provenance
from analysis.nightly.changepoint import Comparison
from analysis.nightly.settings import Settings

Origins = dict[tuple[str, str, str], dict[str, Any]]  # provenance rows by (sweep, host, config)
CELL = ["host", "engine", "model", "workload", "config_id", "concurrency"]  # workload '': the prompt set
COLUMNS = [
    *CELL[:2], "engine_version", "previous_version", *CELL[2:], "verdict", "rule", "component",
    "changed_at", "change_pct", "change_lo_pct", "change_hi_pct", "p_value", "nights", "latest_tps",
    "baseline_tps", "baseline_nights", "accept_length", "accept_change_pct", "accept_p",
    "step_time_ms", "step_source", "step_change_pct", "step_p", "window_baseline_tps",
    "window_nights", "window_change_pct", "band_tps", "cause", "provenance",
]  # fmt: skip


def nightly(
    sweeps: pd.DataFrame, runs: pd.DataFrame, column: str = objectives.DEFAULT.column
) -> pd.DataFrame:
    """One row per (cell, sweep), oldest sweep first: medians of the runs that completed; `tps` is
    the objective's `column` (nights ingested before the history kept it have none)."""
    rank = {sid: i for i, sid in enumerate(sweeps["sweep_id"])}
    ok = runs["run_ok"].astype(bool)
    speculative = runs["speculative"].fillna(0).astype(bool)
    # Time per verify step without the engine's own: mean ITL (1 / decode tok/s) x tokens per
    # step, the accept length, which is 1 without speculation.
    tokens_per_step = runs["accept_length"].where(speculative, 1.0)
    runs = runs.assign(
        rank=runs["sweep_id"].map(rank),
        engine_version=runs["engine_version"].fillna("unknown"),
        tps=runs[column].astype("float64").where(ok),
        accept=runs["accept_length"].where(ok & speculative),
        step_engine=runs["step_time_ms"].where(ok),
        step_derived=(tokens_per_step / runs["decode_tps"] * 1000.0).where(ok),
    )
    return (
        runs.groupby([*CELL, "rank", "sweep_id"], dropna=False)
        .agg(
            tps=("tps", "median"),
            accept=("accept", "median"),
            step_engine=("step_engine", "median"),
            step_derived=("step_derived", "median"),
            engine_version=("engine_version", "first"),
            cause=("cause", "first"),
        )
        .reset_index()
        .sort_values("rank", kind="stable")
    )


def _pct(ratio: float | None) -> float:
    """A ratio as a % change (nan for none)."""
    return math.nan if ratio is None else (ratio - 1.0) * 100.0


def _window_pct(window: judge.Window | None) -> float:
    """The window rule's % change (nan without one)."""
    return math.nan if window is None else window.change * 100.0


def _test_columns(prefix: str, test: Comparison | None) -> dict[str, float]:
    """A component's change and its p-value."""
    return {
        f"{prefix}_change_pct": _pct(test and test.ratio),
        f"{prefix}_p": test.p_value if test else math.nan,
    }


def _nights(nights: pd.DataFrame) -> judge.Nights:
    """A cell's nights as the rules read them (the last one judged)."""
    return judge.Nights(
        *(nights[c].to_numpy(dtype=float) for c in ("tps", "accept", "step_engine", "step_derived")),
        same_version=(nights["engine_version"] == nights["engine_version"].iloc[-1]).to_numpy(),
    )


def _cell(
    nights: pd.DataFrame, n: judge.Nights, s: Settings, priors: judge.Priors, origins: Origins
) -> dict[str, Any]:
    """The verdict row of one cell, from its nights up to the judged one (the last)."""
    latest = nights.iloc[-1]
    version = latest["engine_version"]
    v = judge.judge(n, s, priors)
    measured = nights[nights["tps"].notna()]
    earlier = measured[measured["rank"] < latest["rank"]]
    previous = earlier["engine_version"].iloc[-1] if len(earlier) else None
    tps, window = v.tps, v.window
    by_test = tps is not None and v.rule != "window"
    lo, hi = tps.ci if tps else (math.nan, math.nan)
    row = {
        **{c: latest[c] for c in CELL},
        "engine_version": version,
        "previous_version": previous if previous != version else None,
        "verdict": v.verdict,
        "rule": v.rule,
        "component": v.component,
        "changed_at": None if v.changed_at is None else nights["sweep_id"].iloc[v.changed_at],
        # The window rule judged medians: its own numbers (the interval is still Student's t's).
        "change_pct": _pct(tps.ratio) if by_test else _window_pct(window),
        "change_lo_pct": _pct(lo),
        "change_hi_pct": _pct(hi),
        "p_value": tps.p_value if tps else math.nan,
        "nights": len(measured),
        "latest_tps": latest["tps"],
        "baseline_tps": math.exp(tps.mean_before) if by_test else (window.baseline if window else math.nan),
        "baseline_nights": v.nights_before if by_test else (window.nights if window else math.nan),
        "accept_length": latest["accept"],
        **_test_columns("accept", v.accept),
        "step_time_ms": latest["step_engine"] if v.step_source == "engine" else latest["step_derived"],
        "step_source": v.step_source,
        **_test_columns("step", v.step),
        "window_baseline_tps": window.baseline if window else math.nan,
        "window_nights": window.nights if window else math.nan,
        "window_change_pct": _window_pct(window),
        "band_tps": window.band if window else math.nan,
        "cause": latest["cause"] if v.verdict == "failed" else None,
        "provenance": None,
    }
    if v.verdict in judge.FAILING and v.changed_at:
        key = (latest["host"], latest["config_id"])
        sides = (nights["sweep_id"].iloc[v.changed_at - 1], nights["sweep_id"].iloc[v.changed_at])
        row["provenance"] = provenance.diff(*(origins.get((sweep, *key)) for sweep in sides))
    return row


def _missing(
    before: pd.DataFrame, now: pd.DataFrame, failures: pd.DataFrame, latest: str, rank: int, s: Settings,
    origins: Origins,
) -> pd.DataFrame:  # fmt: skip
    """Cells measured in the previous `window` sweeps but absent from the latest one."""
    recent = before[(before["rank"] >= rank - s.window) & before["tps"].notna()]
    recent = recent.groupby(CELL, dropna=False).tail(1)
    gone = recent.merge(now[CELL].drop_duplicates(), on=CELL, how="left", indicator=True)
    gone = gone[gone.pop("_merge") == "left_only"]
    lost = failures[failures["sweep_id"] == latest][["host", "config_id", "cause"]]
    gone = gone.drop(columns="cause").merge(lost.drop_duplicates(["host", "config_id"]), how="left")
    hosts = set(now["host"]) | set(lost["host"])
    failed = gone["cause"].notna()
    gone["cause"] = gone["cause"].mask(~failed & ~gone["host"].isin(hosts), "host not in latest sweep")
    keys = zip(gone["sweep_id"], gone["host"], gone["config_id"], failed, strict=True)
    diffs = [
        provenance.diff(origins.get((sweep, host, config)), origins.get((latest, host, config)))
        if bad
        else None
        for sweep, host, config, bad in keys
    ]
    return gone.assign(
        verdict=np.where(failed, "failed", "missing"),
        component="none",
        changed_at=np.where(failed, latest, None),
        baseline_tps=gone["tps"],
        nights=np.nan,
        provenance=diffs,
    )


def verdicts(tables: dict[str, pd.DataFrame], latest: str, s: Settings) -> tuple[pd.DataFrame, judge.Priors]:
    """One row per cell of the latest sweep, or missing from it, with its verdict; the noise the
    cells of the night share (judge.fleet_noise)."""
    sweeps = tables["sweeps"]
    rank = int(np.flatnonzero(sweeps["sweep_id"] == latest)[0])
    per_night = nightly(sweeps, tables["runs"], objectives.get(s.objective).column)
    per_night = per_night[per_night["rank"] <= rank]
    now = per_night[per_night["rank"] == rank]
    origins = tables["provenance"].set_index(list(provenance.KEY)).to_dict("index")
    # per_night's order (oldest first) is kept within each cell.
    judged = [
        (frame, _nights(frame))
        for _, frame in per_night.merge(now[CELL], on=CELL).groupby(CELL, dropna=False, sort=False)
    ]
    priors = judge.fleet_noise([n for _, n in judged], s)
    rows = [_cell(frame, n, s, priors, origins) for frame, n in judged]
    before = per_night[per_night["rank"] < rank]
    missing = _missing(before, now, tables["config_failures"], latest, rank, s, origins)
    parts = [frame for frame in (pd.DataFrame(rows, columns=COLUMNS), missing) if len(frame)]
    table = (
        pd.concat(parts, ignore_index=True).reindex(columns=COLUMNS)
        if parts
        else pd.DataFrame(columns=COLUMNS)
    )
    return table, priors
