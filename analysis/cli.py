"""The `python -m analysis` command line: a thin dispatcher over subcommand modules."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

# Each module exposes `add_parser(subparsers)`, which adds its subparser and sets `func`
# (args -> exit code). Adding a subcommand is adding its module here.
SUBCOMMANDS = ("report.cli", "report.recommend_cli", "nightly.history", "nightly.regress", "search.cli")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered."""
    parser = argparse.ArgumentParser(prog="python -m analysis", description="Analyse specsweep result facts.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"analysis.{name}").add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse argv and run the chosen subcommand; returns the process exit code."""
    args = build_parser().parse_args(argv)
    return int(args.func(args))
