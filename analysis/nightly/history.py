"""The history store (SQLite) and the `ingest` subcommand that appends sweeps to it.

One row per measured run, keyed on (sweep_id, host, config_id, workload, concurrency, launch, repeat;
workload '' for the one prompt set of sweeps without named workloads; launch k of a config launched
more than once, as the repeated baseline and the finalists are): ingesting
the same sweep twice adds nothing (INSERT OR IGNORE), and a sweep ingested while it was still
running gains only its new runs. Configs that failed before measuring anything have no run: they
are kept in `config_failures`, keyed on (sweep_id, host, config_id). What each config ran with
(analysis.nightly.provenance) is kept in `provenance` under the same key. The config `recommend`
would deploy at each load level (analysis.nightly.recommendations, under the SLA given to ingest)
is kept in `recommendations`, keyed on (sweep_id, host, engine, model, workload, concurrency);
ingesting a sweep again replaces it. Sweeps are ordered by when they started (the earliest fact's
start), which is what "previous runs" means in `regress`. What deploy.yml put into production is kept in
`deployments` (analysis.deployments).

The runs table takes its config columns from analysis.sweep.config. A store written by an older
specsweep is brought up to date when it is opened: missing tables are created and missing run
columns added (NULL in the rows stored before: not recorded then); a table whose key lacks the
workload or the launch is rebuilt with it (its rows: workload '', launch 1). PRAGMA user_version
holds SCHEMA_VERSION; a store from a newer specsweep is refused.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from analysis import deployments, objectives
from analysis.facts.load import LoadResult
from analysis.facts.options import add_load_options, load
from analysis.nightly import provenance, recommendations
from analysis.objectives import Objective
from analysis.report.compare import run_score
from analysis.report.sla import Sla, add_sla_options, with_run_goodput
from analysis.sweep.config import COLUMN_TYPES, COLUMNS

DEFAULT = Path("results/history.sqlite")
# 1: runs without step times, adaptive or provenance (user_version 0, as SQLite starts); 2: without
# recommendations; 3: without workloads, or deployments (analysis.deployments); 4: runs without the
# launch in their key (a config's second launch was taken for its first, ingested already); 5: this.
SCHEMA_VERSION = 5
SQL_TYPES = {bool: "INTEGER", int: "INTEGER", str: "TEXT"}
NO_SLA = Sla()
KEY_COLUMNS = {
    "sweep_id": "TEXT NOT NULL", "host": "TEXT NOT NULL", "engine": "TEXT NOT NULL",
    "engine_version": "TEXT", "model": "TEXT NOT NULL", "config_id": "TEXT NOT NULL",
}  # fmt: skip
RUN_COLUMNS = {
    **KEY_COLUMNS,
    **{name: SQL_TYPES[COLUMN_TYPES[name]] for name in COLUMNS},
    "source": "TEXT", "workload": "TEXT NOT NULL DEFAULT ''", "concurrency": "INTEGER NOT NULL",
    "launch": "INTEGER NOT NULL DEFAULT 1", "repeat": "INTEGER NOT NULL",
    "run_ok": "INTEGER NOT NULL", "cause": "TEXT", "decode_tps": "REAL", "accept_length": "REAL",
    "ttft_s": "REAL", "tpot_s": "REAL", "step_time_ms": "REAL",
    # Each objective's value of the run (analysis.objectives; goodput under ingest's SLA):
    # what `regress --objective` judges.
    "total_tps": "REAL", "user_tps": "REAL", "goodput_rps": "REAL",
}  # fmt: skip
FAILURE_FIELDS = ["sweep_id", "host", "engine", "engine_version", "model", "config_id", "cause", "message"]
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS sweeps (
    sweep_id TEXT PRIMARY KEY, started_at REAL, ingested_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    {", ".join(f"{name} {kind}" for name, kind in RUN_COLUMNS.items())},
    PRIMARY KEY (sweep_id, host, config_id, workload, concurrency, launch, repeat));
CREATE TABLE IF NOT EXISTS config_failures (
    sweep_id TEXT NOT NULL, host TEXT NOT NULL, engine TEXT, engine_version TEXT, model TEXT,
    config_id TEXT NOT NULL, cause TEXT, message TEXT,
    PRIMARY KEY (sweep_id, host, config_id));
CREATE TABLE IF NOT EXISTS provenance (
    sweep_id TEXT NOT NULL, host TEXT NOT NULL, config_id TEXT NOT NULL,
    {", ".join(f"{name} TEXT" for name in provenance.FIELDS)},
    PRIMARY KEY (sweep_id, host, config_id));
{recommendations.TABLE}{deployments.TABLE}"""


class HistoryError(Exception):
    """The file is not a history store this specsweep can read."""


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Add the run columns an older store lacks; refuse a table that is not a runs table."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    for name, kind in RUN_COLUMNS.items():
        if name in present:
            continue
        if "NOT NULL" in kind and "DEFAULT" not in kind:  # every store had these: this is something else
            raise HistoryError(f"{path}: table runs has no column {name}; not a specsweep history store")
        conn.execute(f"ALTER TABLE runs ADD COLUMN {name} {kind}")
    for table, values in (("recommendations", recommendations.VALUES), ("deployments", deployments.VALUES)):
        kept = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        for name, kind in values.items():  # all nullable: NULL, not recorded then
            if name not in kept:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
    for table in ("runs", "recommendations"):
        _rekey(conn, table)


def _key(conn: sqlite3.Connection, table: str) -> list[str]:
    """The table's primary key columns, in key order."""
    info = conn.execute(f"PRAGMA table_info({table})")
    return [row[1] for row in sorted((r for r in info if r[5]), key=lambda r: r[5])]


def _rekey(conn: sqlite3.Connection, table: str) -> None:
    """Rebuild a table of an older store whose key lacks a column SCHEMA's has (the workload, the
    launch; SQLite cannot change a primary key in place): rename, create anew from SCHEMA, copy,
    drop; in the caller's transaction, so an interrupted upgrade leaves the store as it was. The
    rows take the new key column's default ('' workload, launch 1), which _migrate has added."""
    create = next(part for part in SCHEMA.split(";") if f"EXISTS {table} (" in part)
    scratch = sqlite3.connect(":memory:")
    try:
        scratch.execute(create)
        wanted = _key(scratch, table)
        known = {row[1] for row in scratch.execute(f"PRAGMA table_info({table})")}
    finally:
        scratch.close()
    if _key(conn, table) == wanted:
        return
    # A column SCHEMA no longer has (itl_s: the chunk gaps, not a latency) is left behind.
    names = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
    columns = ", ".join(n for n in names if n in known)
    conn.execute(f"ALTER TABLE {table} RENAME TO {table}_before_rekey")
    conn.execute(create)
    conn.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {table}_before_rekey")
    conn.execute(f"DROP TABLE {table}_before_rekey")


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating or upgrading if needed) a history store; HistoryError if it cannot be one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise HistoryError(
                f"{path}: history schema {version} was written by a newer specsweep (this one reads up to "
                f"{SCHEMA_VERSION}); upgrade specsweep to read it"
            )
        conn.executescript(SCHEMA)
        with conn:
            _migrate(conn, path)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise HistoryError(f"{path}: not a history store ({exc})") from exc
    except HistoryError:
        conn.close()
        raise
    return conn


def _records(frame: pd.DataFrame, fields: list[str]) -> list[tuple[Any, ...]]:
    """Rows as tuples of plain Python values (NA -> NULL) for executemany."""
    plain = frame[fields].astype(object)
    return [tuple(None if pd.isna(v) else v for v in row) for row in plain.itertuples(index=False, name=None)]


def _insert(
    conn: sqlite3.Connection, table: str, frame: pd.DataFrame, fields: list[str], replace: bool = False
) -> None:
    """INSERT OR IGNORE (or REPLACE) the frame's rows, naming the columns (a migrated table has its own
    order)."""
    names, marks = ", ".join(fields), ", ".join("?" * len(fields))
    verb = "REPLACE" if replace else "IGNORE"
    conn.executemany(f"INSERT OR {verb} INTO {table} ({names}) VALUES ({marks})", _records(frame, fields))


def ingest(
    conn: sqlite3.Connection, result: LoadResult, sla: Sla = NO_SLA, objective: Objective = objectives.DEFAULT
) -> dict[str, tuple[int, int, int]]:
    """Add the loaded runs, provenance and recommendation; per sweep (runs added, runs already present,
    load levels recommended).

    Failures count as runs.
    """
    runs = with_run_goodput(result.runs, result.requests, sla)
    # Every objective's value per run (NaN where the run did not complete), whichever ranks tonight.
    runs = runs.assign(**{o.column: run_score(runs, o) for o in objectives.OBJECTIVES.values()})
    measured = runs[runs["run_index"].notna()].astype({"run_ok": "int64", "speculative": "int64"})
    measured = measured.assign(
        workload=measured["workload"].astype(object).fillna(""),
        launch=measured["launch_index"].fillna(1).astype("int64"),
    )
    failed = runs[runs["run_index"].isna() & runs["failed"]]
    origins = provenance.read(result.files)
    recommended = recommendations.compute(result, sla, objective)
    counts: dict[str, tuple[int, int, int]] = {}
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
            _insert(conn, "runs", mine, list(RUN_COLUMNS))
            _insert(conn, "config_failures", lost, FAILURE_FIELDS)
            added = conn.total_changes - before
            levels = int((recommended["sweep_id"] == sweep).sum())
            counts[str(sweep)] = (added, len(mine) + len(lost) - added, levels)
        _insert(conn, "provenance", origins, [*provenance.KEY, *provenance.FIELDS])
        _insert(conn, "recommendations", recommended, recommendations.FIELDS, replace=True)
    return counts


def read(conn: sqlite3.Connection) -> dict[str, pd.DataFrame]:
    """Every table as a frame: sweeps (in start order), runs, config_failures, provenance, recommendations."""
    return {
        "sweeps": pd.read_sql("SELECT * FROM sweeps ORDER BY started_at, sweep_id", conn),
        "runs": pd.read_sql("SELECT * FROM runs", conn),
        "config_failures": pd.read_sql("SELECT * FROM config_failures", conn),
        "provenance": pd.read_sql("SELECT * FROM provenance", conn),
        "recommendations": pd.read_sql("SELECT * FROM recommendations", conn),
    }


def add_history_option(parser: argparse.ArgumentParser) -> None:
    """--history PATH: the store a subcommand reads or writes."""
    parser.add_argument("--history", type=Path, default=DEFAULT, metavar="PATH", help=f"default: {DEFAULT}")


def add_parser(subparsers: Any) -> None:
    """Register `ingest` on the CLI's subparsers."""
    parser = subparsers.add_parser(
        "ingest",
        help="append sweeps to the history store",
        description="Append sweeps to the SQLite history (idempotent: a stored run is not added again), with "
        "the config `recommend` would deploy at each load level (under the --sla-* given here).",
    )
    add_load_options(parser)
    add_history_option(parser)
    add_sla_options(parser)  # the SLA the stored recommendation is made under, as `recommend` takes it
    objectives.add_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load the folders and add their runs to the history; exit 2 when nothing was readable."""
    sla, objective = Sla.from_args(args), objectives.from_args(args)
    problem = objectives.sla_problem(objective, sla.given)
    if problem:
        print(f"analysis ingest: {problem}", file=sys.stderr)
        return 2
    result = load(args)
    if result.runs.empty:
        print(f"no readable result facts under {' '.join(map(str, args.sweeps))}", file=sys.stderr)
        return 2
    try:
        conn = connect(args.history)
    except HistoryError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        counts = ingest(conn, result, sla, objective)
    finally:
        conn.close()
    for sweep, (added, present, levels) in counts.items():
        stored = f"{present} already in {args.history}"
        print(f"{sweep}: {added} run(s) added, {stored}; recommendation stored for {levels} level(s)")
    return 0
