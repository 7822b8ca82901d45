"""The `deployed` subcommand: per host, the latest deployment in the history store.

    python -m analysis deployed [--history DB] [--format text|json]

lists, per host, the latest deployment: config, sweep, argv hash, port, launcher, when, the gate's
figures against the sweep's, and whether the recommendation has moved since (analysis.deployments).
A module of its own, above the history store it opens (analysis.nightly.history imports the store).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.deployments import latest, moved, recommended_now
from analysis.nightly.history import HistoryError, add_history_option, connect

SHOWN = [
    "host", "config", "sweep_id", "concurrency", "port", "launcher", "argv_sha256", "deployed", "gate",
    "recommended_now",
]  # fmt: skip


def deployed_configs(path: Path) -> dict[str, str]:
    """Per host, the config of its latest deployment in the store at `path` ({} without a store)."""
    if not path.is_file():
        return {}
    conn = connect(path)
    try:
        table = latest(conn)
    finally:
        conn.close()
    return dict(zip(table["host"], table["config"], strict=True))


def _gate(r: pd.Series) -> str:
    """The gate's figures in a few words."""
    accept = "" if pd.isna(r["gate_accept_length"]) else f", accept {r['gate_accept_length']:.2f}"
    unit = r["gate_unit"] if isinstance(r.get("gate_unit"), str) else "tok/s"  # NULL: stored before units
    spec = ".1f" if unit == "tok/s" else ".2f"  # as the gate printed them
    sweep = f"sweep {r['sweep_tok_s']:{spec}}, floor {r['gate_tok_s_floor']:{spec}}"
    return f"{r['gate_tok_s']:{spec}} {unit} ({sweep}){accept}"


def table_text(table: pd.DataFrame) -> str:
    """The latest deployments as an aligned text table."""
    if table.empty:
        return "nothing deployed yet\n"
    shown = table.assign(
        deployed=pd.to_datetime(table["deployed_at"], unit="s", utc=True).dt.strftime("%Y-%m-%d %H:%M:%SZ"),
        argv_sha256=table["argv_sha256"].str[:12],
        gate=table.apply(_gate, axis=1),
        recommended_now=table.apply(recommended_now, axis=1),
    )
    return shown[SHOWN].to_string(index=False) + "\n"


def add_parser(subparsers: Any) -> None:
    """Register `deployed` on the CLI's subparsers."""
    parser = subparsers.add_parser(
        "deployed",
        help="what deploy.yml put into production on each host",
        description="Per host, the latest deployment recorded in the history store: config, sweep, argv "
        "hash, port and the gate's figures.",
    )
    add_history_option(parser)
    parser.add_argument("--format", choices=("text", "json"), default="text", help="default: text")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the latest deployment per host; exit 2 when the store cannot be read."""
    if not args.history.is_file():
        print(
            f"{args.history}: no history store (deploy.yml writes one next to the sweep's results)",
            file=sys.stderr,
        )
        return 2
    try:
        conn = connect(args.history)
    except HistoryError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        table = moved(conn, latest(conn))
    finally:
        conn.close()
    if args.format == "json":
        sys.stdout.write(json.dumps(json.loads(table.to_json(orient="records")), indent=2) + "\n")
    else:
        sys.stdout.write(table_text(table))
    return 0
