"""`report` subcommand: the step-count comparison of one or more sweeps, printed and/or written."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from analysis import cache, objectives
from analysis.facts.load import LoadResult
from analysis.facts.options import add_load_options, load
from analysis.objectives import Objective
from analysis.report.compare import NOISY_CV, step_table
from analysis.report.crosshost import SLOW_PCT, cross_host, host_speed
from analysis.report.deploy import adaptive_blocks, sla_blocks
from analysis.report.plotter import Plotter
from analysis.report.positions import position_blocks, position_table
from analysis.report.recommend import adaptive_table
from analysis.report.render import FORMATS, Tables, render, render_markdown
from analysis.report.sla import Sla, add_sla_options, with_run_goodput, with_sla

EXIT_OK = 0
EXIT_USAGE = 2  # argparse's own code for bad usage; also "nothing to report"
NO_SLA = Sla()


def add_parser(subparsers: Any) -> None:
    """Register `report` on the CLI's subparsers."""
    parser = subparsers.add_parser(
        "report",
        help="compare configs against the baseline",
        description="Print decode tok/s, speedup vs baseline (95%% CI), acceptance, latency per config.",
    )
    add_load_options(parser)
    parser.add_argument("--format", choices=FORMATS, default="text", help="what to print (default: text)")
    parser.add_argument(
        "--out", type=Path, metavar="FOLDER", help="also write report.md, report.html and PNG plots there"
    )
    parser.add_argument(
        "--noisy-cv", type=float, default=NOISY_CV, metavar="RATIO",
        help=f"flag cells whose per-repeat tok/s vary more than this (std/mean; default {NOISY_CV})",
    )  # fmt: skip
    parser.add_argument(
        "--slow-host-pct", type=float, default=SLOW_PCT, metavar="PCT",
        help=f"flag hosts this far below the fleet median (default {SLOW_PCT:g})",
    )  # fmt: skip
    add_sla_options(parser)
    objectives.add_option(parser)
    parser.set_defaults(func=run)


def ranking(args: argparse.Namespace) -> tuple[Sla, Objective]:
    """The SLA and objective of report / recommend / ingest options; ObjectiveError for goodput
    without an SLO."""
    sla, objective = Sla.from_args(args), objectives.from_args(args)
    problem = objectives.sla_problem(objective, sla.given)
    if problem:
        raise objectives.ObjectiveError(problem)
    return sla, objective


def build_tables(
    result: LoadResult,
    noisy_cv: float = NOISY_CV,
    slow_pct: float = SLOW_PCT,
    sla: Sla = NO_SLA,
    objective: Objective = objectives.DEFAULT,
) -> Tables:
    """The step table (with goodput and throughput, ranked on `objective`), cross-host view and host
    speeds of loaded results; the SLA view when an SLA is given, the adaptive view when an adaptive
    arm was measured, and the acceptance by draft position where the engine reported it."""
    runs = with_run_goodput(result.runs, result.requests, sla) if objective.needs_sla else result.runs
    step = step_table(runs, result.requests, noisy_cv=noisy_cv, objective=objective)
    step = with_sla(step, result.runs, result.requests, sla)
    extra = [
        *(sla_blocks(step, sla) if sla.given else []),
        *adaptive_blocks(adaptive_table(step)),
        *position_blocks(position_table(result.runs)),
    ]
    speed = host_speed(step, slow_pct)
    return Tables(step=step, cross=cross_host(step), speed=speed, noisy_cv=noisy_cv, extra=extra)


def write_report(
    tables: Tables, out: Path, problems: list[str], plotter: Plotter | None = None
) -> list[Path]:
    """Write report.md, report.html and every plot (PNG) into `out`; the paths written.

    `plotter`: one already drawing these tables' plots (as `run` starts it); else they are drawn now.
    """
    if plotter is None:
        with Plotter() as own:
            own.submit(tables.step, tables.speed)
            return write_report(tables, out, problems, own)
    from analysis.report import html

    md = render_markdown(tables)
    body = html.sections(tables)  # laid out while the plots are still being drawn
    plots, omitted = plotter.result()
    note = f"plots for the first families only: {omitted} more in the tables" if omitted else ""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for p in plots:
        (out / p.name).write_bytes(p.png)
        written.append(out / p.name)
    md += "".join(f"\n![{p.caption}]({p.name})\n" for p in plots)
    files = {
        "report.md": "# specsweep report\n\n" + (f"{note}\n\n" if note else "") + md,
        "report.html": html.page(body, plots, problems, note),
    }
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
        written.append(out / name)
    return written


def run(args: argparse.Namespace) -> int:
    """Load, compare, print the table on stdout (problems on stderr), write --out if asked."""
    # Plots start now, in a helper that imports matplotlib while the rows load (analysis.report.plotter).
    try:
        sla, objective = ranking(args)
    except objectives.ObjectiveError as exc:
        print(f"analysis report: {exc}", file=sys.stderr)
        return EXIT_USAGE
    wanted = args.out is not None or args.format == "html"
    with Plotter() if wanted else contextlib.nullcontext() as plotter:
        result = load(args)
        if result.runs.empty:
            dirs = " ".join(str(p) for p in args.sweeps)
            print(f"no readable result facts under {dirs}", file=sys.stderr)
            return EXIT_USAGE
        tables = build_tables(result, args.noisy_cv, args.slow_host_pct, sla, objective)
        if plotter is not None:
            plotter.submit(tables.step, tables.speed, None if args.no_cache else cache.folder())
        problems = [f"{path}: {reason}" for path, reason in result.problems]
        if plotter is not None and args.format == "html":
            from analysis.report.html import render_html

            sys.stdout.write(render_html(tables, plotter.result()[0], problems))
        else:
            sys.stdout.write(render(tables, args.format))  # while the plots are drawn
        if args.out:
            written = write_report(tables, args.out, problems, plotter)
            print(f"wrote {len(written)} files to {args.out}", file=sys.stderr)
    return EXIT_OK
