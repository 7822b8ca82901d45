"""`regress` subcommand: the latest sweep against a rolling baseline of the previous ones.

For each (host, engine, engine version, model, config, concurrency) measured in the latest sweep,
its median decode tok/s is compared with the median of that cell's medians in the previous K
sweeps (same engine version only). A regression is a drop larger than both the relative threshold
and k x MAD of those K medians (MAD = median absolute deviation, unscaled): a 6% drop on a cell
that swings 10% night to night is not flagged, nor is a 1% drop on a rock-steady one. A config
that measured before and now fails counts as a regression. Improvements, new configs, configs
missing from the latest sweep and engine-version changes (shown, never compared across) are listed
too. Exit status: 1 when anything regressed, 0 otherwise, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.nightly import history
from analysis.nightly.regress_report import markdown, write_junit

CELL = ["host", "engine", "model", "config_id", "concurrency"]
CELL_V = ["host", "engine", "engine_version", "model", "config_id", "concurrency"]
FAILING = ("regression", "failed")
COLUMNS = [
    "status", *CELL_V, "previous_version", "latest_tps", "baseline_tps", "n_previous", "change_pct",
    "band_tps", "cause",
]  # fmt: skip


@dataclass(frozen=True)
class Settings:
    """How far back to look and what counts as a real change."""

    window: int = 5
    threshold: float = 0.05
    mad_k: float = 3.0


def _medians(runs: pd.DataFrame, order: dict[str, int]) -> pd.DataFrame:
    """Per (sweep, cell): median tok/s of the runs that completed, and the first failure cause."""
    runs = runs.assign(
        engine_version=runs["engine_version"].fillna("unknown"),
        rank=runs["sweep_id"].map(order),
        tps=runs["decode_tps"].where(runs["run_ok"].astype(bool)),
    )
    return (
        runs.groupby(["sweep_id", "rank", *CELL_V], dropna=False)
        .agg(tps=("tps", "median"), cause=("cause", "first"))
        .reset_index()
    )


def _baselines(before: pd.DataFrame, window: int) -> pd.DataFrame:
    """Per cell (with version): median and MAD of its last `window` sweep medians, and how many."""
    hist = before.sort_values("rank").groupby(CELL_V, dropna=False).tail(window)
    base = hist.groupby(CELL_V, dropna=False)["tps"].agg(baseline_tps="median", n_previous="size")
    hist = hist.merge(base, on=CELL_V)
    mad = (hist["tps"] - hist["baseline_tps"]).abs().groupby([hist[c] for c in CELL_V], dropna=False).median()
    return base.assign(mad=mad).reset_index()


def _other_version(before: pd.DataFrame, now: pd.DataFrame) -> pd.DataFrame:
    """Cells of `now` last measured under another engine version: that version and its median."""
    last = before.sort_values("rank").groupby(CELL, dropna=False).tail(1)
    last = last[[*CELL, "engine_version", "tps"]].rename(
        columns={"engine_version": "previous_version", "tps": "previous_tps"}
    )
    return now[[*CELL, "engine_version"]].merge(last, on=CELL)


def verdicts(
    sweeps: pd.DataFrame, runs: pd.DataFrame, failures: pd.DataFrame, latest: str, s: Settings
) -> pd.DataFrame:
    """One row per cell of the latest sweep, or missing from it, with its status."""
    order = {sid: i for i, sid in enumerate(sweeps["sweep_id"])}
    rank = order[latest]
    meds = _medians(runs, order)
    now = meds[meds["rank"] == rank]
    before = meds[(meds["rank"] < rank) & meds["tps"].notna()]
    out = now.merge(_baselines(before, s.window), on=CELL_V, how="left").rename(columns={"tps": "latest_tps"})
    out["change_pct"] = (out["latest_tps"] / out["baseline_tps"] - 1.0) * 100.0
    out["band_tps"] = s.mad_k * out["mad"]
    delta = out["latest_tps"] - out["baseline_tps"]
    known = out["n_previous"].notna()
    beyond = out["change_pct"].abs() > s.threshold * 100.0
    status = pd.Series("unchanged", index=out.index).where(known, "new")
    status = status.mask(known & beyond & (-delta > out["band_tps"]), "regression")
    status = status.mask(known & beyond & (delta > out["band_tps"]), "improvement")
    status = status.mask(known & out["latest_tps"].isna(), "failed")
    other = _other_version(before, out[~known])
    other = other[other["previous_version"] != other["engine_version"]]
    out = out.merge(other.drop(columns="engine_version"), on=CELL, how="left")
    changed = ~known & out["previous_version"].notna()
    out["status"] = status.mask(changed, "version_changed")
    out["baseline_tps"] = out["baseline_tps"].fillna(out.pop("previous_tps"))
    return pd.concat([out, _missing(before, now, failures, latest, rank, s.window)], ignore_index=True)[
        COLUMNS
    ]


def _missing(
    before: pd.DataFrame, now: pd.DataFrame, failures: pd.DataFrame, latest: str, rank: int, window: int
) -> pd.DataFrame:
    """Cells measured in the previous `window` sweeps but absent from the latest one."""
    recent = before[before["rank"] >= rank - window].sort_values("rank").groupby(CELL, dropna=False).tail(1)
    gone = recent.merge(now[CELL].drop_duplicates(), on=CELL, how="left", indicator=True)
    gone = gone[gone.pop("_merge") == "left_only"].rename(columns={"tps": "baseline_tps"})
    lost = failures[failures["sweep_id"] == latest][["host", "config_id", "cause"]].drop_duplicates(
        ["host", "config_id"]
    )
    gone = gone.drop(columns="cause").merge(lost, on=["host", "config_id"], how="left")
    hosts = set(now["host"]) | set(lost["host"])
    gone["status"] = pd.Series("missing", index=gone.index).mask(gone["cause"].notna(), "failed")
    gone["cause"] = gone["cause"].mask(
        gone["cause"].isna() & ~gone["host"].isin(hosts), "host not in latest sweep"
    )
    return gone.assign(latest_tps=float("nan"), previous_version=None)


def add_parser(subparsers: Any) -> None:
    """Register `regress` on the CLI's subparsers."""
    parser = subparsers.add_parser(
        "regress",
        help="flag regressions of the latest sweep against the history",
        description="Compare the latest sweep with the previous K (exit 1 when anything regressed).",
    )
    parser.add_argument(
        "--history", type=Path, default=history.DEFAULT, metavar="DB", help="SQLite history store"
    )
    parser.add_argument("--latest", metavar="SWEEP", help="sweep to judge (default: the last one started)")
    parser.add_argument(
        "--window", type=int, default=Settings.window, metavar="K", help="previous sweeps to use"
    )
    parser.add_argument(
        "--threshold", type=float, default=Settings.threshold, help="relative change (0.05 = 5%%)"
    )
    parser.add_argument(
        "--mad-k", type=float, default=Settings.mad_k, help="noise band: k x MAD of the K medians"
    )
    parser.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML (one testcase per cell)")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="also write the Markdown summary here")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Judge the latest sweep; print the Markdown summary; 1 if anything regressed."""
    if not args.history.is_file():
        print(f"no history store at {args.history} (run `python -m analysis ingest` first)", file=sys.stderr)
        return 2
    if args.window < 1:
        print("--window must be at least 1", file=sys.stderr)
        return 2
    conn = sqlite3.connect(args.history)
    try:
        sweeps, runs, failures = history.read(conn)
    finally:
        conn.close()
    latest = args.latest or (sweeps["sweep_id"].iloc[-1] if len(sweeps) else None)
    if latest not in set(sweeps["sweep_id"]):
        known = ", ".join(sweeps["sweep_id"]) or "none"
        print(f"sweep {latest!r} is not in {args.history} (known: {known})", file=sys.stderr)
        return 2
    s = Settings(args.window, args.threshold, args.mad_k)
    table = verdicts(sweeps, runs, failures, latest, s)
    text = markdown(table, latest, s)
    sys.stdout.write(text)
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    if args.junit:
        write_junit(table, latest, args.junit)
    return 1 if table["status"].isin(FAILING).any() else 0
