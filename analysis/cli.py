"""The `python -m analysis` command line: a thin dispatcher over subcommand modules."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Each subcommand and its module, which exposes `add_parser(subparsers)`: it adds the subparser and
# sets `func` (args -> exit code). Adding a subcommand is adding its line here. A run imports only
# its own subcommand's module: a report need not load the search's or the nightly's (40 ms).
SUBCOMMANDS = {
    "report": "report.cli",
    "recommend": "report.recommend_cli",
    "ingest": "nightly.history",
    "regress": "nightly.regress",
    "search": "search.cli",
    "settings": "sweep.settings_doc",
    "metrics": "report.metrics_doc",
    "deployed": "deploy.deployed",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser with `command` registered, or every subcommand when it names none."""
    parser = argparse.ArgumentParser(prog="python -m analysis", description="Analyse specsweep result facts.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in [command] if command in SUBCOMMANDS else SUBCOMMANDS:
        importlib.import_module(f"analysis.{SUBCOMMANDS[name]}").add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse argv and run the chosen subcommand; returns the process exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # The top level has no option taking a value, so its first word is the subcommand.
    command = next((word for word in argv if not word.startswith("-")), None)
    args = build_parser(command).parse_args(argv)
    return int(args.func(args))
