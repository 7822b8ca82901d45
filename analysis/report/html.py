"""A self-contained HTML report: inline CSS, plots as base64 PNG data URIs, no external URL.

The markup is in templates/ (jinja2, autoescaping every value); this module hands them the report's
tables and plots. Table cells are the one exception: escaped here, a column at a time (see
templates/tables.html.j2 for why). The templates are compiled once and kept in the analysis cache
(analysis.cache), not compiled again by every report.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import operator
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from pathlib import Path

import jinja2
import numpy as np
from markupsafe import Markup

from analysis import cache
from analysis.report.plotfile import Plot
from analysis.report.render import Block, Tables, escape_all

OPTIONS = dict(autoescape=True, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


class _Compiled(jinja2.FileSystemBytecodeCache):
    """The templates compiled before (jinja2 checks each against its source), kept in the analysis
    cache; one that cannot be read or kept is simply compiled again."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except (OSError, EOFError, ValueError, TypeError, pickle.UnpicklingError):
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


def environment() -> jinja2.Environment:
    """The templates' environment, over the templates compiled before (kept in the analysis cache)."""
    return _environment(cache.folder())


@functools.cache
def _environment(where: Path | None) -> jinja2.Environment:
    """The templates' environment, keeping what it compiles under `where` (None: nowhere)."""
    kept = cache.subfolder(where, cache.TEMPLATES)
    # The compiled code also depends on these options and on jinja2, which its own check does not see.
    key = hashlib.sha256(repr((jinja2.__version__, sorted(OPTIONS.items()))).encode()).hexdigest()[:16]
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
        undefined=jinja2.StrictUndefined,
        bytecode_cache=None if kept is None else _Compiled(str(kept), f"{key}-%s.cache"),
        **OPTIONS,
    )
    # Markup: base64 has nothing to escape, and escaping a megabyte of it is a pass for nothing.
    env.filters["base64"] = lambda data: Markup(base64.b64encode(data).decode("ascii"))
    return env


@dataclass(frozen=True)
class Table:
    """A block as the templates lay it out: a class per column and per row, the cells escaped."""

    title: str
    note: str
    headers: list[str]
    classes: list[str]  # per column: `r` right-aligned, `cv` the cell a noisy row marks
    kinds: list[str]  # per row: best, tie, failed and/or noisy, or nothing
    columns: list[list[str]]

    def __post_init__(self) -> None:
        if any(len(cells) != len(self.kinds) for cells in self.columns):
            raise ValueError(f"table {self.title!r}: a column's length is not the number of rows")

    def body(self, row: Callable[[list[str], str], str]) -> Markup:
        """The table's rows: `row` (the template's macro) lays out one pattern per kind of row, with
        a `%s` per cell, which the cells fill here in one pass of C loops (no Python call per row)."""
        patterns = {kind: str(row(self.classes, kind)) for kind in dict.fromkeys(self.kinds)}
        rows = zip(*self.columns, strict=True)
        return Markup("".join(map(operator.mod, map(patterns.__getitem__, self.kinds), rows)))


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
        ("SLA, goodput, adaptive and acceptance", [_table(b) for b in tables.extra]),
    ]
    template = environment().get_template("tables.html.j2")
    return Markup(template.render(step=_step_tables(tables), legend=tables.legend, views=views))


def page(tables_part: Markup, plots: list[Plot], problems: list[str] | None = None, note: str = "") -> str:
    """The whole report as one HTML document that opens offline, around the `sections` of its tables.

    Apart from `render_html` so that the tables can be laid out while the plots are still drawn.
    """
    template = environment().get_template("report.html.j2")
    return template.render(tables=tables_part, plots=plots, problems=problems or [], note=note)


def render_html(tables: Tables, plots: list[Plot], problems: list[str] | None = None, note: str = "") -> str:
    """The whole report as one HTML document that opens offline."""
    return page(sections(tables), plots, problems, note)
