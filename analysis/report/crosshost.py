"""Cross-host view: the same config on several hosts side by side, so a slow host stands out."""

from __future__ import annotations

import pandas as pd

from analysis.hostorder import natural, sort_key

FAMILY = ["sweep_id", "engine", "model", "workload", "concurrency"]  # a step-table group, minus the host
SLOW_PCT = 5.0  # a host this much below the fleet's median (over configs) is flagged slow


def _shared(table: pd.DataFrame) -> pd.DataFrame:
    """Step-table rows of configs measured on more than one host: a shard sweep measures most
    configs on one host only, and a host compared with itself would read +0.0%."""
    hosts = table.groupby([*FAMILY, "config"], dropna=False, observed=True)["host"].transform("nunique")
    return table[hosts > 1]


def cross_host(table: pd.DataFrame) -> pd.DataFrame:
    """Per (family, config): median tok/s of each host as a column, fleet median, spread, slowest."""
    rows = _shared(table)
    if rows.empty:
        return pd.DataFrame(columns=[*FAMILY, "config", "fleet_median", "spread_pct", "slowest"])
    wide = rows.pivot_table(
        index=[*FAMILY, "config"], columns="host", values="decode_tps", aggfunc="first", dropna=False
    )
    hosts = natural(wide.columns)
    wide = wide[hosts].dropna(how="all")
    wide["fleet_median"] = wide[hosts].median(axis=1)
    wide["spread_pct"] = (wide[hosts].max(axis=1) / wide[hosts].min(axis=1) - 1.0) * 100.0
    wide["slowest"] = wide[hosts].idxmin(axis=1)
    wide.columns.name = None
    return wide.reset_index()


def host_speed(table: pd.DataFrame, slow_pct: float = SLOW_PCT) -> pd.DataFrame:
    """Per (family, host): median over configs of its tok/s relative to the fleet median, slow flag."""
    rows = _shared(table)[[*FAMILY, "host", "config", "decode_tps"]].dropna(subset=["decode_tps"])
    fleet = rows.groupby([*FAMILY, "config"], dropna=False, observed=True)["decode_tps"].transform("median")
    rows = rows.assign(rel=(rows["decode_tps"] / fleet - 1.0) * 100.0)
    out = (
        rows.groupby([*FAMILY, "host"], dropna=False, observed=True)
        .agg(relative_pct=("rel", "median"), configs=("rel", "size"))
        .reset_index()
    )
    out["slow"] = out["relative_pct"] < -slow_pct
    return out.sort_values([*FAMILY, "host"], key=sort_key, ignore_index=True)
