"""The history store (SQLite) and the `ingest` subcommand that appends sweeps to it.

One row per measured run, keyed on (sweep_id, host, config_id, concurrency, repeat): ingesting
the same sweep twice adds nothing (INSERT OR IGNORE), and a sweep ingested while it was still
running gains only its new runs. Configs that failed before measuring anything have no run: they
are kept in `config_failures`, keyed on (sweep_id, host, config_id). Sweeps are ordered by when
they started (the earliest fact's start), which is what "previous runs" means in `regress`.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.facts.load import LoadResult
from analysis.facts.options import add_load_options, load

DEFAULT = Path("results/history.sqlite")
RUN_FIELDS = [
    "sweep_id", "host", "engine", "engine_version", "model", "config_id", "speculative",
    "algorithm", "steps", "topk", "draft_tokens", "env_profile", "source", "concurrency",
    "repeat", "run_ok", "cause", "decode_tps", "accept_length", "ttft_s", "itl_s",
]  # fmt: skip
FAILURE_FIELDS = ["sweep_id", "host", "engine", "engine_version", "model", "config_id", "cause", "message"]
SCHEMA = """
CREATE TABLE IF NOT EXISTS sweeps (
    sweep_id TEXT PRIMARY KEY, started_at REAL, ingested_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    sweep_id TEXT NOT NULL, host TEXT NOT NULL, engine TEXT NOT NULL, engine_version TEXT,
    model TEXT NOT NULL, config_id TEXT NOT NULL, speculative INTEGER, algorithm TEXT,
    steps INTEGER, topk INTEGER, draft_tokens INTEGER, env_profile TEXT, source TEXT,
    concurrency INTEGER NOT NULL, repeat INTEGER NOT NULL, run_ok INTEGER NOT NULL, cause TEXT,
    decode_tps REAL, accept_length REAL, ttft_s REAL, itl_s REAL,
    PRIMARY KEY (sweep_id, host, config_id, concurrency, repeat));
CREATE TABLE IF NOT EXISTS config_failures (
    sweep_id TEXT NOT NULL, host TEXT NOT NULL, engine TEXT, engine_version TEXT, model TEXT,
    config_id TEXT NOT NULL, cause TEXT, message TEXT,
    PRIMARY KEY (sweep_id, host, config_id));
"""


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) a history store with its tables."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA)
    return conn


def _records(frame: pd.DataFrame, fields: list[str]) -> list[tuple[Any, ...]]:
    """Rows as tuples of plain Python values (NA -> NULL) for executemany."""
    plain = frame[fields].astype(object)
    return [tuple(None if pd.isna(v) else v for v in row) for row in plain.itertuples(index=False, name=None)]


def ingest(conn: sqlite3.Connection, result: LoadResult) -> dict[str, tuple[int, int]]:
    """Add the loaded runs; per sweep (runs added, runs already present). Failures count as runs."""
    runs = result.runs
    measured = runs[runs["run_index"].notna()].astype({"run_ok": "int64", "speculative": "int64"})
    failed = runs[runs["run_index"].isna() & runs["failed"]]
    counts: dict[str, tuple[int, int]] = {}
    with conn:
        starts = runs.groupby("sweep_id", observed=True)["started_at"].min()
        for sweep, started in starts.items():
            conn.execute(
                "INSERT INTO sweeps VALUES (?, ?, ?) ON CONFLICT(sweep_id) DO UPDATE SET"
                " started_at = min(coalesce(started_at, excluded.started_at), excluded.started_at)",
                (str(sweep), None if pd.isna(started) else float(started), time.time()),
            )
        for sweep in starts.index:
            mine = measured[measured["sweep_id"] == sweep]
            lost = failed[failed["sweep_id"] == sweep]
            before = conn.total_changes
            marks = ", ".join("?" * len(RUN_FIELDS))
            conn.executemany(f"INSERT OR IGNORE INTO runs VALUES ({marks})", _records(mine, RUN_FIELDS))
            marks = ", ".join("?" * len(FAILURE_FIELDS))
            conn.executemany(
                f"INSERT OR IGNORE INTO config_failures VALUES ({marks})", _records(lost, FAILURE_FIELDS)
            )
            added = conn.total_changes - before
            counts[str(sweep)] = (added, len(mine) + len(lost) - added)
    return counts


def read(conn: sqlite3.Connection) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(sweeps in start order, runs, config failures) as frames."""
    sweeps = pd.read_sql("SELECT * FROM sweeps ORDER BY started_at, sweep_id", conn)
    runs = pd.read_sql("SELECT * FROM runs", conn)
    failures = pd.read_sql("SELECT * FROM config_failures", conn)
    return sweeps, runs, failures


def add_parser(subparsers: Any) -> None:
    """Register `ingest` on the CLI's subparsers."""
    parser = subparsers.add_parser(
        "ingest",
        help="append sweeps to the history store",
        description="Append sweeps to the SQLite history (idempotent: a stored run is not added again).",
    )
    add_load_options(parser)
    parser.add_argument("--history", type=Path, default=DEFAULT, metavar="PATH", help=f"default: {DEFAULT}")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load the folders and add their runs to the history; exit 2 when nothing was readable."""
    result = load(args)
    if result.runs.empty:
        print(f"no readable result facts under {' '.join(map(str, args.sweeps))}", file=sys.stderr)
        return 2
    conn = connect(args.history)
    try:
        counts = ingest(conn, result)
    finally:
        conn.close()
    for sweep, (added, present) in counts.items():
        print(f"{sweep}: {added} run(s) added, {present} already in {args.history}")
    return 0
