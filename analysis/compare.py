"""Compare speculative configs against the baseline of the same sweep, host and load."""

from __future__ import annotations

import pandas as pd

# A table row is one config measured in one of these groups; speedups compare within one.
GROUP = ["sweep_id", "host", "engine", "model", "concurrency"]
CONFIG_COLUMNS = [
    "speculative", "algorithm", "steps", "topk", "draft_tokens", "env_profile",
]  # fmt: skip
TABLE_COLUMNS = [
    *GROUP, "config", *CONFIG_COLUMNS, "decode_tps", "speedup_pct", "accept_length",
    "ttft_p50_ms", "repeats_ok", "failures", "cause", "best",
]  # fmt: skip


def spread_failures(runs: pd.DataFrame) -> pd.DataFrame:
    """Copy rows without a concurrency (config-level failures) to every level measured."""
    outer = GROUP[:-1]
    placed = runs[runs["concurrency"].notna()]
    levels = placed[GROUP].drop_duplicates()
    # A config that failed before measuring anything still belongs in each level's table;
    # with no level measured at all it keeps a missing concurrency and a table of its own.
    floating = runs[runs["concurrency"].isna()].drop(columns="concurrency")
    floating = floating.merge(levels, on=outer, how="left")
    return pd.concat([placed, floating[runs.columns]], ignore_index=True)


def is_baseline(table: pd.DataFrame) -> pd.Series:
    """Rows that are the no-speculation reference of their group."""
    return ~table["speculative"] & table["env_profile"].eq("default")


def step_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (sweep, host, engine, model, concurrency, config) with speedup vs baseline."""
    runs = spread_failures(runs)
    # Numbers from failed runs must not leak into the medians.
    metrics = ["decode_tps", "accept_length", "ttft_s"]
    runs = runs.assign(**{m: runs[m].where(runs["run_ok"]) for m in metrics})
    table = (
        runs.groupby([*GROUP, "config_id"], dropna=False, sort=False)
        .agg(
            **{c: (c, "first") for c in CONFIG_COLUMNS},
            decode_tps=("decode_tps", "median"),
            accept_length=("accept_length", "mean"),
            ttft_s=("ttft_s", "median"),
            repeats_ok=("run_ok", "sum"),
            failures=("failed", "sum"),
            cause=("cause", "first"),
        )
        .reset_index()
        .rename(columns={"config_id": "config"})
    )
    table["ttft_p50_ms"] = table.pop("ttft_s") * 1000.0
    table["_base"] = is_baseline(table)
    base = table.loc[table["_base"], [*GROUP, "decode_tps"]]
    base = base.drop_duplicates(GROUP).rename(columns={"decode_tps": "_base_tps"})
    table = table.merge(base, on=GROUP, how="left")
    table["speedup_pct"] = (table["decode_tps"] / table.pop("_base_tps") - 1.0) * 100.0
    eligible = table["failures"].eq(0) & table["decode_tps"].notna()
    ok_tps = table["decode_tps"].where(eligible)
    top = ok_tps.groupby([table[k] for k in GROUP], dropna=False).transform("max")
    table["best"] = eligible & ok_tps.eq(top)
    # Baseline first, then by step count, top-k, draft tokens (unset before set).
    by = [*GROUP, "_base", "speculative", *CONFIG_COLUMNS[2:], "config"]
    ascending = [c != "_base" for c in by]
    table = table.sort_values(by, ascending=ascending, na_position="first")
    return table[TABLE_COLUMNS].reset_index(drop=True)
