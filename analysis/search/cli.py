"""`python -m analysis search next|summary`: ask the step search, or print what a sweep's searches found."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from analysis import objectives
from analysis.report.sla import Sla, add_sla_options
from analysis.search.state import Asker, InputError, next_step, parse_candidates, profile_of, render_summary
from analysis.sweep import mix


def _name(text: str) -> str:
    """A host or run id, used as one path component."""
    if not text or "/" in text or text.startswith("."):
        raise argparse.ArgumentTypeError(f"{text!r} is not a plain name")
    return text


def _positive(text: str) -> int:
    """An integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not >= 1")
    return value


def _mix(text: str) -> dict[str, float]:
    """The traffic's shares by workload, as the sweep's `mix` reads them."""
    try:
        return mix.parse(text, "--mix", zero=False)
    except mix.MixError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_parser(subparsers: Any) -> None:
    """Register `search next` (what a free host measures next) and `search summary` (what was found)."""
    parser = subparsers.add_parser("search", help="the step search: next probe, or what it found")
    sub = parser.add_subparsers(dest="search_command", required=True, metavar="SEARCH_COMMAND")
    nxt = sub.add_parser("next", help="decide the next probe; candidates as JSON on stdin")
    nxt.add_argument("--sweep-dir", required=True, type=Path, help="results/<sweep_id>")
    nxt.add_argument("--host", required=True, type=_name, help="the host asking")
    nxt.add_argument("--run-id", required=True, type=_name, help="this run's id (claims live under it)")
    nxt.add_argument("--parallel", type=_positive, default=1, help="hosts searching together")
    nxt.add_argument(
        "--scope", required=True, choices=["host", "all"], help="host: own facts; all: all hosts'"
    )
    nxt.add_argument("--max-launches", type=_positive, help="launch budget (default: number of candidates)")
    nxt.add_argument(
        "--concurrency", type=_positive, action="append", default=[], metavar="C",
        help="a concurrency level each launch measures (repeat it: each level's best is searched)",
    )  # fmt: skip
    nxt.add_argument(
        "--mix", type=_mix, default={}, metavar="W=SHARE,...",
        help="judge a launch of several workloads on this mix of requests (default: equal shares)",
    )  # fmt: skip
    nxt.add_argument(
        "--objective", choices=objectives.NAMES, default=objectives.DEFAULT.name,
        help="what a probe is judged on (default: throughput; goodput needs --sla-*)",
    )  # fmt: skip
    add_sla_options(nxt)
    nxt.set_defaults(func=run_next)
    summary = sub.add_parser("summary", help="print what each search of a sweep found, and why")
    summary.add_argument("--sweep-dir", required=True, type=Path, help="results/<sweep_id>")
    summary.set_defaults(func=run_summary)


def run_summary(args: argparse.Namespace) -> int:
    """Print one line per search of the sweep."""
    print(render_summary(args.sweep_dir) or f"{args.sweep_dir}: no step search here")
    return 0


def run_next(args: argparse.Namespace) -> int:
    """Print one JSON line; 0 on any decision, 2 on bad input (message on stderr)."""
    try:
        try:
            text = sys.stdin.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read candidates from stdin: {exc}") from exc
        candidates = parse_candidates(text)
        if not args.sweep_dir.is_dir():
            raise InputError(f"{args.sweep_dir}: no such sweep folder")
        asker = Asker(
            args.sweep_dir, args.host, args.run_id, args.scope, profile_of(candidates[0].id), mix=args.mix,
            objective=objectives.from_args(args), sla=Sla.from_args(args),
        )  # fmt: skip
        answer = next_step(asker, candidates, args.parallel, args.max_launches, sorted(set(args.concurrency)))
    except InputError as exc:
        print(f"analysis search: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(answer))
    return 0
