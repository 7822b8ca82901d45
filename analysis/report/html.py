"""A self-contained HTML report: inline CSS, plots as base64 PNG data URIs, no external URL.

The markup is in templates/ (jinja2, autoescaping every value); this module hands them the report's
tables and plots. Table cells are the one exception: escaped here, a column at a time (see
templates/tables.html.j2 for why).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from html import escape

import jinja2
import numpy as np
from markupsafe import Markup

from analysis.report.plotfile import Plot
from analysis.report.render import LEGEND, Block, Tables, escape_all

ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("analysis.report"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
ENV.filters["base64"] = lambda data: base64.b64encode(data).decode("ascii")


@dataclass(frozen=True)
class Table:
    """A block as the templates lay it out: a class per column and per row, the cells escaped."""

    title: str
    note: str
    headers: list[str]
    classes: list[str]  # per column: `r` right-aligned, `cv` the cell a noisy row marks
    kinds: list[str]  # per row: best, tie, failed and/or noisy, or nothing
    columns: list[list[str]]

    def rows(self) -> Iterator[tuple[str, tuple[str, ...]]]:
        """Each row's class and cells, made as the template reaches them.

        Not kept as a list: 10,000 rows of tuples made the garbage collector walk the whole report
        (up to 40 ms), where each tuple freed as soon as it is laid out costs nothing.
        """
        return zip(self.kinds, zip(*self.columns, strict=True), strict=True)


def _table(block: Block, kinds: list[str] | None = None) -> Table:
    """A block with its cells escaped, its columns classed, and each row's class (`kinds`)."""
    columns = zip(block.headers, block.right, strict=True)
    classes = [" ".join(["r"] * right + ["cv"] * (header == "CV")) for header, right in columns]
    cells = [escape_all(values, escape) for values in block.columns]
    return Table(block.title, block.note, block.headers, classes, kinds or [""] * len(cells[0]), cells)


def _step_tables(tables: Tables) -> list[Table]:
    """One table per comparison group: best, tied, failed and noisy rows marked."""
    step = tables.step
    best = step["best"].astype(bool).to_numpy()
    failed = step["failures"].gt(0).to_numpy()
    tie = step["tie_best"].fillna(False).astype(bool).to_numpy()
    noisy = step["noisy"].astype(bool).to_numpy()
    kind = np.where(best, "best", np.where(failed, "failed", np.where(tie, "tie", "")))
    kind = np.char.strip(np.char.add(kind, np.where(noisy, " noisy", "")))
    return [_table(b, kind[b.rows].tolist()) for b in tables.blocks.step if b.rows is not None]


def sections(tables: Tables) -> Markup:
    """The tables' part of the page: step tables and legend, then the other views (profiles, hosts, ...)."""
    views = [
        ("Env profiles", [_table(b) for b in tables.blocks.profiles]),
        ("Cross-host", [_table(b) for b in tables.blocks.cross]),
        ("SLA, goodput and adaptive", [_table(b) for b in tables.extra]),
    ]
    legend = [line.format(cv=tables.noisy_cv * 100) for line in LEGEND]
    template = ENV.get_template("tables.html.j2")
    return Markup(template.render(step=_step_tables(tables), legend=legend, views=views))


def page(tables_part: Markup, plots: list[Plot], problems: list[str] | None = None, note: str = "") -> str:
    """The whole report as one HTML document that opens offline, around the `sections` of its tables.

    Apart from `render_html` so that the tables can be laid out while the plots are still drawn.
    """
    template = ENV.get_template("report.html.j2")
    return template.render(tables=tables_part, plots=plots, problems=problems or [], note=note)


def render_html(tables: Tables, plots: list[Plot], problems: list[str] | None = None, note: str = "") -> str:
    """The whole report as one HTML document that opens offline."""
    return page(sections(tables), plots, problems, note)
