"""Compare speculative configs against the baseline of the same sweep, host and load."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis import hostorder, metrics, objectives
from analysis.report import equivalence
from analysis.report.launches import launch_table
from analysis.stats import log_ratio_ci, median_ci, ratio_ci, straddles_zero, verdict
from analysis.sweep import config
from analysis.sweep.launchprior import LAUNCH_CV_PRIOR

# A table row is one config measured in one of these groups; speedups compare within one. A host
# group's facts share a baseline launch; each launch measures every (workload, concurrency).
HOST_KEYS = ["sweep_id", "host", "engine", "model"]
LOAD_KEYS = ["workload", "concurrency"]  # workload None: the one prompt set of older facts
GROUP = [*HOST_KEYS, *LOAD_KEYS]
CONFIG_COLUMNS = config.COLUMNS
# The report's own columns; each metric's column (analysis.metrics) goes where its line places it.
OWN_COLUMNS = [
    *GROUP, "config", *CONFIG_COLUMNS, "source", "engine_version", "tps_ci_lo",
    "tps_ci_hi", "speedup_pct", "speedup_ci_lo", "speedup_ci_hi", "within_noise",
    "vs_best_pct", "vs_best_ci_lo", "vs_best_ci_hi", "tie_best",
    "cv_pct", "noisy", "repeats_ok", "failures",
    "cause", "text_compared", "text_diverged", "diverge_word", "best",
    # what ranks: the objective's median (speedup, verdict, best and their intervals are of it)
    "objective", "score",
    "n_ok", "log_var",
    "se2", "se_df",  # what an interval against another row needs (analysis.report.recommend)
    # launches behind the row and how its interval was made (analysis.report.launches), the
    # verdict against the baseline, repeats flagged for interference, unsteady launches, drift
    "launches", "ci_basis", "verdict", "verdict_ci_lo", "verdict_ci_hi", "interfered", "unsteady",
    "launch_cv_pct", "launch_df", "drift_pct", "drift_ci_lo", "drift_ci_hi", "drifting",
    # the launch spread a one-launch verdict allowed (analysis.running.prior): CV %, its df (NaN: known)
    "launch_prior_cv_pct", "launch_prior_df",
    # was the load level held (docs/load.md), and did the server queue what the client counted
    # in flight (docs/results.md)
    "level_reached", "queued",
]  # fmt: skip
TABLE_COLUMNS = metrics.place(OWN_COLUMNS)
NOISY_CV = 0.05  # a cell whose repeats vary more than this (std / mean) is flagged noisy
# The launch spread a one-launch verdict allows, per row (analysis.running.prior).
PRIOR_COLUMNS = ["launch_prior_cv_pct", "launch_prior_df"]
# What the speedup intervals need from the other side.
_STATS = ["score", "se2", "se_df", "launches", "ci_basis"]
# A level is reached when every good repeat held at least this share of the asked concurrency in
# flight (time-weighted over the measured window). A closed loop holds 99%+ (a finished request is
# replaced within a millisecond); 90% still marks a level one request short up to c = 9, and is the
# issue's own bar (7.2 of 8). Where the server gave its own count of running requests, that count
# is what is held (the client's counts what it sent, queued in the server or not); a level whose
# server queued more than the rest, 1 - REACHED of it on average over a repeat, is marked queued.
REACHED = 0.9


def spread_failures(runs: pd.DataFrame) -> pd.DataFrame:
    """Copy rows without a concurrency (config-level failures) to every level and workload measured."""
    placed = runs[runs["concurrency"].notna()]
    levels = placed[GROUP].drop_duplicates()
    # A config that failed before measuring anything still belongs in each level's table;
    # with no level measured at all it keeps a missing concurrency and a table of its own.
    floating = runs[runs["concurrency"].isna()].drop(columns=LOAD_KEYS)
    floating = floating.merge(levels, on=HOST_KEYS, how="left")
    return pd.concat([placed, floating[runs.columns]], ignore_index=True)


def is_baseline(table: pd.DataFrame) -> pd.Series:
    """Rows that are the no-speculation reference of their group."""
    return ~table["speculative"].astype(bool) & table["env_profile"].eq("default")


def total_tps(runs: pd.DataFrame) -> pd.Series:
    """Per measured run (a repeat with failed requests included): every request's output tokens /
    the run's duration; NaN for a row that measured nothing. A steady-load run's duration is its
    window (docs/load.md): the tokens generated inside it, requests straddling its edges included."""
    duration = runs["duration_s"].where(runs["duration_s"] > 0)
    tokens = runs["window_output_tokens"].astype("float64").fillna(runs["output_tokens"].astype("float64"))
    tps = tokens.fillna(0.0) / duration
    return tps.where(runs["run_index"].notna())


def run_score(runs: pd.DataFrame, objective: objectives.Objective) -> pd.Series:
    """Per run row: the objective's value, NaN for a run that did not complete.

    Goodput reads the runs' own goodput_rps (analysis.report.sla.with_run_goodput: it needs the
    requests and the SLOs); ValueError where they do not carry it.
    """
    if objective is objectives.THROUGHPUT:
        value = total_tps(runs)
    elif objective.column in runs.columns:
        value = runs[objective.column].astype("float64")
    else:
        raise ValueError(f"objective {objective.name}: the runs carry no {objective.column} (no SLA given?)")
    return value.where(runs["run_ok"].fillna(False).astype(bool))


def _cells(runs: pd.DataFrame, objective: objectives.Objective) -> pd.DataFrame:
    """One row per (group, config): medians over repeats that completed, counts, spread."""
    # Numbers from failed runs must not leak into the cells (throughput counts every request).
    figures = [m.name for m in metrics.LEVEL if m.row]
    score = run_score(runs, objective)
    runs = runs.assign(**{m: runs[m].where(runs["run_ok"]) for m in figures})
    runs = runs.assign(
        score=score,
        log_tps=np.log(score.where(score > 0)),
        total_tps=total_tps(runs),
        # In flight: the server's running count where it gave one, else the client's.
        _held=runs["server_running"].fillna(runs["achieved_concurrency"]),
        _queued=runs["server_queued"] > (1.0 - REACHED) * runs["concurrency"],
    )
    cells = (
        runs.groupby([*GROUP, "config_id"], dropna=False, sort=False, observed=True)
        .agg(
            **{c: (c, "first") for c in [*CONFIG_COLUMNS, "source", "engine_version"]},
            **{m.level_column: (m.name, m.per_level) for m in metrics.LEVEL},
            score=("score", "median"),
            n_ok=("log_tps", "count"),
            log_var=("log_tps", "var"),
            tps_mean=("score", "mean"),
            tps_std=("score", "std"),
            repeats_ok=("run_ok", "sum"),
            failures=("failed", "sum"),
            cause=("cause", "first"),
            _least_held=("_held", "min"),
            _queued=("_queued", "any"),
            launch_prior_cv_pct=("launch_prior_cv_pct", "first"),
            launch_prior_df=("launch_prior_df", "first"),
        )
        .reset_index()
    )
    launches = launch_table(runs, GROUP, HOST_KEYS, is_baseline(runs))
    cells = cells.merge(launches, on=[*GROUP, "config_id"], how="left").rename(
        columns={"config_id": "config"}
    )
    cells = cells.rename(columns={"basis": "ci_basis", "launch_tau2": "_tau2"})
    cells["launches"] = cells["launches"].fillna(0).astype("int64")
    cells["interfered"] = cells["interfered"].fillna(0).astype("int64")
    cells["unsteady"] = cells["unsteady"].fillna(0).astype("int64")
    cells["launch_cv_pct"] = np.sqrt(np.expm1(cells.pop("_tau2"))) * 100.0
    for col in ("sweep_id", "host", "engine", "model", "workload", "config", "source"):
        cells[col] = cells[col].astype("object")
    for m in (m for m in metrics.LEVEL if m.scale != 1.0):
        cells[m.level_column] *= m.scale
    return cells


def _versus(table: pd.DataFrame, chosen: pd.Series, prefix: str) -> pd.DataFrame:
    """The table with each row's group reference (the `chosen` row) as `<prefix>` columns."""
    ref = table.loc[chosen, [*GROUP, *_STATS]].drop_duplicates(GROUP)
    ref = ref.rename(columns={c: f"{prefix}{c}" for c in _STATS})
    return table.merge(ref, on=GROUP, how="left")


def step_table(
    runs: pd.DataFrame,
    requests: pd.DataFrame | None = None,
    noisy_cv: float = NOISY_CV,
    objective: objectives.Objective = objectives.DEFAULT,
) -> pd.DataFrame:
    """One row per (sweep, host, engine, model, concurrency, config): speedups with 95% CIs, on the
    objective's value per repeat (`score`; analysis.objectives)."""
    table = _cells(spread_failures(runs), objective)
    table["objective"] = objective.name
    table["tps_ci_lo"], table["tps_ci_hi"] = median_ci(table["score"], table["se2"], table["se_df"])
    table["_base"] = is_baseline(table)
    table = _versus(table, table["_base"], "b_")
    table["speedup_pct"] = (table["score"] / table["b_score"] - 1.0) * 100.0
    ratio = table["score"] / table["b_score"]
    lo, hi = log_ratio_ci(ratio, table["se2"], table["se_df"], table["b_se2"], table["b_se_df"])
    table["speedup_ci_lo"], table["speedup_ci_hi"] = lo.where(~table["_base"]), hi.where(~table["_base"])
    table["within_noise"] = straddles_zero(table["speedup_ci_lo"], table["speedup_ci_hi"])
    table["verdict_ci_lo"], table["verdict_ci_hi"] = verdict_ci(table, ratio, "b_")
    table["verdict"] = verdict(table["verdict_ci_lo"], table["verdict_ci_hi"]).where(~table["_base"])
    # A comparison rests on the fewer launches of its two sides, its interval on the weaker basis.
    table["launches"] = np.fmin(table["launches"], table["b_launches"].fillna(table["launches"])).astype(
        "int64"
    )
    within = table["ci_basis"].eq("within_launch") | table["b_ci_basis"].eq("within_launch")
    by_launch = np.where(table["launches"].gt(1), "launches", "launch_var")
    table["ci_basis"] = table["ci_basis"].where(
        table["b_ci_basis"].isna(), np.where(within, "within_launch", by_launch)
    )

    eligible = table["failures"].eq(0) & table["score"].notna()
    ok_tps = table["score"].where(eligible)
    top = ok_tps.groupby([table[k] for k in GROUP], dropna=False).transform("max")
    table["best"] = eligible & ok_tps.eq(top)
    table = _versus(table, table["best"], "t_")
    ratio = table["score"] / table["t_score"]
    table["vs_best_pct"] = (ratio - 1.0) * 100.0
    # Against the best on the verdict's basis (racing drops a config on this interval alone).
    lo, hi = verdict_ci(table, ratio, "t_")
    table["vs_best_ci_lo"], table["vs_best_ci_hi"] = lo.where(~table["best"]), hi.where(~table["best"])
    # Tied with the best: the interval of (this / best) still contains "no difference".
    table["tie_best"] = straddles_zero(table["vs_best_ci_lo"], table["vs_best_ci_hi"])

    least = table.pop("_least_held")
    # <NA> where no run recorded it (older facts, a failed config): not known, not "not reached".
    table["level_reached"] = (least >= REACHED * table["concurrency"]).astype("boolean").mask(least.isna())
    queued = table.pop("_queued")
    table["queued"] = queued.astype("boolean").mask(table["server_queued"].isna())
    table["cv_pct"] = table["tps_std"] / table["tps_mean"] * 100.0
    table["noisy"] = table["cv_pct"].gt(noisy_cv * 100.0)
    table = _with_equivalence(table, runs, requests)
    # Hosts in natural order; baseline first, then by the config's fields in the config's order
    # (step count, top-k, draft tokens, ...; unset first). Not by algorithm: a name, not an order.
    by = [*GROUP, "_base", *(c for c in CONFIG_COLUMNS if c != "algorithm"), "config"]
    ascending = [c != "_base" for c in by]
    table = table.sort_values(by, ascending=ascending, na_position="first", key=hostorder.sort_key)
    return table[TABLE_COLUMNS].reset_index(drop=True)


def verdict_ci(table: pd.DataFrame, ratio: pd.Series, ref: str) -> tuple[pd.Series, pd.Series]:
    """The interval a verdict of each row against its reference (the `ref`-prefixed columns: b_ the
    baseline, t_ the best) is taken on: Welch's over the two sides' se2, widened where the host
    group measured no config twice (ci_basis within_launch).

    There the CI says only how steady one launch was; the verdict allows each side a launch effect
    on top: the host's spread from its earlier sweeps (launch_prior_cv_pct, worth launch_prior_df),
    else LAUNCH_CV_PRIOR treated as known, so a single run's decisive word is one the next run does
    not contradict (issue 24: +116.5% [+49, +214] and +53% [+37, +72] of one sweep).
    """
    se2, se_df, r_se2, r_se_df = table["se2"], table["se_df"], table[f"{ref}se2"], table[f"{ref}se_df"]
    lo, hi = log_ratio_ci(ratio, se2, se_df, r_se2, r_se_df)
    one = table["ci_basis"].eq("within_launch") | table[f"{ref}ci_basis"].eq("within_launch")
    if not one.any():
        return lo, hi
    # A frame without PRIOR_COLUMNS (a mix's) takes the assumed spread.
    missing = pd.Series(np.nan, index=table.index)
    cv = (table.get("launch_prior_cv_pct", missing) / 100.0).fillna(LAUNCH_CV_PRIOR)
    prior = np.log1p(cv**2)
    a, b = se2 + prior, r_se2 + prior
    # Satterthwaite: the repeats' parts and the prior's (one estimate on both sides; an assumed
    # prior is known, infinite degrees of freedom, and adds nothing).
    prior_part = ((2.0 * prior) ** 2 / table.get("launch_prior_df", missing)).fillna(0.0)
    df = (a + b) ** 2 / (se2**2 / se_df + r_se2**2 / r_se_df + prior_part)
    wide_lo, wide_hi = ratio_ci(ratio, a + b, df)
    return lo.where(~one, wide_lo.where(lo.notna())), hi.where(~one, wide_hi.where(hi.notna()))


def _with_equivalence(table: pd.DataFrame, runs: pd.DataFrame, requests: pd.DataFrame | None) -> pd.DataFrame:
    """The table with text_compared / text_diverged / diverge_word from the request texts."""
    columns = {"text_compared": "Int64", "text_diverged": "Int64", "diverge_word": "Int64"}
    if requests is None or requests.empty:
        return table.assign(**{c: pd.array([pd.NA] * len(table), dtype=t) for c, t in columns.items()})
    facts = runs.drop_duplicates("fact_id").set_index("fact_id")
    group_of = facts.groupby(HOST_KEYS, dropna=False, observed=True, sort=False).ngroup()
    found = equivalence.summary(requests, group_of, facts.index[is_baseline(facts)])
    keys = facts[[*HOST_KEYS, "config_id"]].astype("object").reset_index()
    found = found.merge(keys, on="fact_id").rename(columns={"config_id": "config"})
    found = (  # one cell, several files (rare): their requests add up
        found.groupby([*GROUP, "config"], dropna=False)
        .agg(
            text_compared=("text_compared", "sum"),
            text_diverged=("text_diverged", "sum"),
            diverge_word=("diverge_word", "min"),
        )
        .reset_index()
        .astype({"concurrency": "Int64"})
    )
    return table.merge(found, on=[*GROUP, "config"], how="left").astype(columns)
