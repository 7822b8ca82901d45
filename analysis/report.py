"""`report` subcommand: print the step-count comparison of one or more sweeps."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from analysis.compare import step_table
from analysis.load import load_sweeps
from analysis.render import FORMATS, render

EXIT_OK = 0
EXIT_USAGE = 2  # argparse's own code for bad usage; also "nothing to report"


def add_parser(subparsers: Any) -> None:
    """Register `report` on the CLI's subparsers."""
    parser = subparsers.add_parser(
        "report",
        help="compare configs against the baseline",
        description="Print decode tok/s, speedup vs baseline and acceptance per config.",
    )
    parser.add_argument("sweeps", nargs="+", type=Path, metavar="DIR", help="results/<sweep_id>")
    parser.add_argument("--format", choices=FORMATS, default="text", help="default: text")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load, compare, print the table on stdout and unreadable files on stderr."""
    result = load_sweeps(args.sweeps)
    if result.facts:
        sys.stdout.write(render(step_table(result.runs), args.format))
    if result.problems:
        print(f"{len(result.problems)} file(s) skipped:", file=sys.stderr)
        for path, reason in result.problems:
            print(f"  {path}: {reason}", file=sys.stderr)
    if not result.facts:
        dirs = " ".join(str(p) for p in args.sweeps)
        print(f"no readable result facts under {dirs}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK
