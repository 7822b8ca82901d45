"""`regress` subcommand: judge the latest sweep against each cell's history, and say so where people look.

Per cell (host, engine, model, config, concurrency): change points of its nightly tok/s
(E-divisive means with Student's t, analysis.nightly.changepoint) and a drop over its last two or
three nights against the nights before them, in tok/s or in the factor of it that carries the drop
(recent_drop, on noise levels the cells of the night share: analysis.nightly.noise), the window/MAD
rule where it has too few nights (or instead, or as well: --rule), and the acceptance-collapse
gate; each verdict names the night the change began, its size with a 95% interval, the component
that moved (acceptance or step time) and what the facts of the two nights differ in
(analysis.nightly.judge, analysis.nightly.verdicts). The Markdown summary goes to stdout (and
--markdown); --json, --junit and --prometheus (a node_exporter textfile) carry the same verdicts.
The summary and --json also list where the config `recommend` would deploy at a load level changed
since the previous sweep (analysis.nightly.recommendations), and each host's deployed config against
the night's recommendation, with "redeploy" where it moved far enough (analysis.deployments):
information, never a failure. Exit status: 1 when anything regressed or failed, 0 otherwise, 2 for
bad usage; the recommendation changes and the deployed configs play no part in it.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from analysis import deployments
from analysis.nightly import history, prometheus, recommendations
from analysis.nightly.judge import FAILING, YOUNG_NIGHTS
from analysis.nightly.regress_report import Night, markdown, write_json, write_junit
from analysis.nightly.settings import CHOICES, RECENT_TEXT, Settings
from analysis.nightly.verdicts import verdicts

# Settings field -> (metavar, help); each becomes --field-name, its default the Settings default.
HELP = {
    "window": ("K", "window rule: previous nights of the same engine version; also how many nights a change"
               " point stays news"),
    "threshold": ("SHARE", "window rule: relative change that counts (0.05 = 5%%)"),
    "mad_k": ("K", "window rule: noise band, k x MAD of the window's nights"),
    "alpha": ("P", "change-point rule: largest Student's t p-value of a change point"),
    "min_change": ("SHARE", "change-point rule: smallest change of a change point (0.02 = 2%%)"),
    "nights": ("N", "change-point rule: a cell's last N nights are searched"),
    "recent_alpha": ("P", "recent-drop rule: largest one-sided t p-value of a drop over the last"
                     f" {RECENT_TEXT} nights, shared among tok/s and its factors (accept length, step time)"),
    "rule": ("RULE", "which tok/s rule decides: change_point (the window rule too below"
             f" {YOUNG_NIGHTS} nights), window, or either"),
    "noise": ("NOISE", "recent-drop rule: shared (the noise the night's cells agree on, with each cell's own)"
              " or own (each cell's alone)"),
    "min_accept_length": ("L", "gate: a speculative cell below this accept length regressed"),
    "accept_drop": ("SHARE", "gate: ... or this share below the median of its previous nights"),
    "objective": ("NAME", "what a cell's night is: its median of throughput (total tok/s), per_user or"
                  " goodput (stored at ingest under its SLA)"),
}  # fmt: skip


def add_parser(subparsers: Any) -> None:
    """Register `regress` on the CLI's subparsers."""
    parser = subparsers.add_parser(
        "regress",
        help="flag regressions of the latest sweep against the history",
        description="Judge the latest sweep on each cell's nightly history (exit 1 when anything regressed).",
    )
    parser.add_argument(
        "--history", type=Path, default=history.DEFAULT, metavar="DB", help="SQLite history store"
    )
    parser.add_argument("--latest", metavar="SWEEP", help="sweep to judge (default: the last one started)")
    rules = parser.add_argument_group("rules")
    for field in dataclasses.fields(Settings):
        metavar, text = HELP[field.name]
        rules.add_argument(
            Settings.option(field.name),
            type=str if field.name in CHOICES else type(field.default),
            default=field.default,
            choices=CHOICES.get(field.name),
            metavar=metavar,
            help=f"{text} (default: {field.default})",
        )
    out = parser.add_argument_group("outputs")
    out.add_argument("--markdown", type=Path, metavar="FILE", help="also write the Markdown summary here")
    out.add_argument(
        "--json", type=Path, metavar="FILE", help="write the verdicts and the recommendation changes as JSON"
    )
    out.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML (one testcase per cell)")
    out.add_argument(
        "--prometheus",
        type=Path,
        metavar="FILE",
        help="write a node_exporter textfile (e.g. .../regress.prom)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Judge the latest sweep; print the Markdown summary; write the files asked for; 1 if anything failed."""
    try:
        s = Settings(**{field.name: getattr(args, field.name) for field in dataclasses.fields(Settings)})
    except ValueError as exc:  # the option's name is the setting's, with dashes
        print(f"regress: {exc}", file=sys.stderr)
        return 2
    if not args.history.is_file():
        print(f"no history store at {args.history} (run `python -m analysis ingest` first)", file=sys.stderr)
        return 2
    try:
        conn = history.connect(args.history)
    except history.HistoryError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        tables = history.read(conn)
        sweeps = tables["sweeps"]
        latest = args.latest or (sweeps["sweep_id"].iloc[-1] if len(sweeps) else None)
        deployed = deployments.moved(conn, deployments.latest(conn), latest)
    finally:
        conn.close()
    if latest not in set(sweeps["sweep_id"]):
        known = ", ".join(sweeps["sweep_id"]) or "none"
        print(f"sweep {latest!r} is not in {args.history} (known: {known})", file=sys.stderr)
        return 2
    table, priors = verdicts(tables, latest, s)
    night = Night(table, latest, s, recommendations.changes(tables, latest), priors, deployed)
    text = markdown(night)
    sys.stdout.write(text)
    if args.markdown:  # like the other outputs, into a folder made if need be
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(text, encoding="utf-8")
    if args.json:
        write_json(night, args.json)
    if args.junit:
        write_junit(table, latest, args.junit)
    if args.prometheus:
        started = sweeps.loc[sweeps["sweep_id"] == latest, "started_at"].iloc[0]
        prometheus.write(table, started, args.prometheus)
    return 1 if table["verdict"].isin(FAILING).any() else 0
