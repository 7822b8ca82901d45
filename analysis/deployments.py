"""What runs where: one row per host each time deploy.yml put a config into production there (its
gates passed), in the history store's `deployments` table, and whether the recommendation has moved
since: the newest sweep in the store that measured the host at that load level (`ingest`, the
nightly's) recommends another config that is more than MOVED_PCT % faster there than the deployed
one (information, never a failure). The `deployed` subcommand (analysis.deploy.deployed) prints it.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import pandas as pd

VALUES = {
    "sweep_id": "TEXT NOT NULL", "config": "TEXT NOT NULL", "concurrency": "INTEGER", "engine": "TEXT",
    "model": "TEXT", "argv_sha256": "TEXT NOT NULL", "port": "INTEGER", "launcher": "TEXT",
    "gate_tok_s": "REAL", "gate_tok_s_floor": "REAL", "gate_accept_length": "REAL", "gate_errors": "INTEGER",
    "gate_requests": "INTEGER", "sweep_tok_s": "REAL", "sweep_tok_s_ci_lo": "REAL",
    "sweep_accept_ci_lo": "REAL", "sweep_accept_ci_hi": "REAL",
    # The gate's figures' unit (tok/s; req/s for goodput); NULL: stored before it was, tok/s.
    "gate_unit": "TEXT",
}  # fmt: skip
FIELDS = ["host", "deployed_at", *VALUES]
TABLE = f"""
CREATE TABLE IF NOT EXISTS deployments (
    host TEXT NOT NULL, deployed_at REAL NOT NULL,
    {", ".join(f"{name} {kind}" for name, kind in VALUES.items())},
    PRIMARY KEY (host, deployed_at));
"""
# % by which the newest recommendation must beat the deployed config, in the same sweep, to say redeploy.
MOVED_PCT = 5.0


def row(host: str, target: dict[str, Any], verdict: dict[str, Any], launcher: str) -> dict[str, Any]:
    """The stored row for a host whose deployment of `target` (choice.choose's) passed `verdict`."""
    sweep = target["sweep"]
    return {
        "host": host, "deployed_at": time.time(), "sweep_id": target["sweep_id"], "config": target["config"],
        "concurrency": target["concurrency"], "engine": target["engine"], "model": target["model"],
        "argv_sha256": target["argv_sha256"], "port": target["port"], "launcher": launcher,
        "gate_tok_s": verdict["tok_s"], "gate_tok_s_floor": verdict["tok_s_floor"],
        "gate_accept_length": verdict["accept_length"], "gate_errors": verdict["errors"],
        "gate_requests": verdict["requests"], "sweep_tok_s": sweep["tok_s"],
        "sweep_tok_s_ci_lo": sweep["tok_s_ci_lo"], "sweep_accept_ci_lo": sweep["accept_ci_lo"],
        "sweep_accept_ci_hi": sweep["accept_ci_hi"], "gate_unit": verdict.get("unit", "tok/s"),
    }  # fmt: skip


def record(conn: sqlite3.Connection, values: dict[str, Any]) -> None:
    """Add one deployment."""
    names = ", ".join(FIELDS)
    with conn:
        conn.execute(
            f"INSERT INTO deployments ({names}) VALUES ({', '.join('?' * len(FIELDS))})",
            [values[f] for f in FIELDS],
        )


def latest(conn: sqlite3.Connection) -> pd.DataFrame:
    """Per host, its latest deployment (hosts in name order)."""
    table = pd.read_sql("SELECT * FROM deployments", conn)
    table = table.sort_values("deployed_at").drop_duplicates("host", keep="last")
    return table.sort_values("host").reset_index(drop=True)


def moved(conn: sqlite3.Connection, deployed: pd.DataFrame, sweep_id: str | None = None) -> pd.DataFrame:
    """The deployed rows with the newest stored recommendation at their host and level (that of
    `sweep_id` where given: the nightly's night): newest_sweep, newest_config, moved_pct (the newest
    config's tok/s over the deployed one's in that sweep, %) and redeploy (another config, more than
    MOVED_PCT % faster)."""
    recs = pd.read_sql(
        "SELECT r.sweep_id, r.host, r.concurrency, r.config, r.decode_tps, s.started_at"
        " FROM recommendations r JOIN sweeps s USING (sweep_id) WHERE r.config IS NOT NULL",
        conn,
    )
    if sweep_id is not None:
        recs = recs[recs["sweep_id"] == sweep_id]
    newest = recs.sort_values("started_at").drop_duplicates(["host", "concurrency"], keep="last")
    newest = newest.rename(
        columns={"sweep_id": "newest_sweep", "config": "newest_config", "decode_tps": "new_tps"}
    )
    out = deployed.merge(newest.drop(columns="started_at"), on=["host", "concurrency"], how="left")
    runs = pd.read_sql(
        "SELECT sweep_id AS newest_sweep, host, concurrency, config_id AS config, decode_tps FROM runs"
        " WHERE run_ok = 1",
        conn,
    )
    now = runs.groupby(["newest_sweep", "host", "concurrency", "config"])["decode_tps"].median()
    out = out.merge(now.rename("old_tps").reset_index(), on=["newest_sweep", "host", "concurrency", "config"],
                    how="left")  # fmt: skip
    other = out["newest_config"].notna() & out["newest_config"].ne(out["config"])
    out["moved_pct"] = ((out["new_tps"] / out["old_tps"] - 1.0) * 100.0).where(other, 0.0)
    out["redeploy"] = other & (out["moved_pct"].gt(MOVED_PCT) | out["old_tps"].isna())
    return out.drop(columns=["new_tps", "old_tps"])


def recommended_now(r: pd.Series) -> str:
    """The newest recommendation against the deployed config, in a few words."""
    if not isinstance(r["newest_config"], str):
        return "-"
    if r["newest_config"] == r["config"]:
        return f"same ({r['newest_sweep']})"
    gain = "not measured there" if pd.isna(r["moved_pct"]) else f"{r['moved_pct']:+.1f}%"
    return f"{r['newest_config']} ({r['newest_sweep']}, {gain}){': redeploy' if r['redeploy'] else ''}"
