"""Command-line options shared by the subcommands that load results (report, ingest)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analysis.facts.jsonl import Labels
from analysis.facts.load import LoadResult, load_sweeps


def add_load_options(parser: argparse.ArgumentParser) -> None:
    """Folders to load, the cache switch, and the JSONL label overrides."""
    parser.add_argument(
        "sweeps", nargs="+", type=Path, metavar="DIR", help="results/<sweep_id>, or one fact / JSONL file"
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="parse every file and draw every plot again (default: reuse rows of unchanged files and "
        "plots of unchanged rows)",
    )
    jsonl = parser.add_argument_group(
        "SGLang JSONL",
        "bench_serving / bench_one_batch_server files outside <sweep_id>/<host>/<config_id>.jsonl",
    )
    jsonl.add_argument(
        "--jsonl-sweep", metavar="ID", help="sweep id (default: the grandparent folder's name)"
    )
    jsonl.add_argument("--jsonl-host", metavar="HOST", help="host (default: the parent folder's name)")
    jsonl.add_argument(
        "--jsonl-config", metavar="CONFIG_ID", help="config id, e.g. s2-k1-d3 (default: file name)"
    )
    jsonl.add_argument(
        "--jsonl-model", metavar="MODEL", help="model (default: the line's model_id, else unknown)"
    )


def load(args: argparse.Namespace) -> LoadResult:
    """Load what the options name; unreadable files are listed on stderr."""
    labels = Labels(args.jsonl_sweep, args.jsonl_host, args.jsonl_config, args.jsonl_model)
    result = load_sweeps(args.sweeps, labels, use_cache=not args.no_cache)
    if result.problems:
        print(f"{len(result.problems)} file(s) or line(s) skipped:", file=sys.stderr)
        for path, reason in result.problems:
            print(f"  {path}: {reason}", file=sys.stderr)
    return result
