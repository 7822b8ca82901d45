"""A self-contained HTML report: inline CSS, plots as base64 PNG data URIs, no external URL."""

from __future__ import annotations

import base64
from html import escape

import numpy as np

from analysis.report.plotfile import Plot
from analysis.report.render import LEGEND, Block, Tables, escape_all

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; } h3 { font-size: 1em; }
table { border-collapse: collapse; margin: 0.4em 0 1.2em; }
th, td { padding: 2px 8px; border-bottom: 1px solid #ddd; white-space: nowrap; }
th { background: #f3f3f3; text-align: left; }
td.r { text-align: right; font-variant-numeric: tabular-nums; }
tr.best td { background: #e6f4e6; font-weight: 600; }
tr.tie td { background: #f2f8f2; }
tr.failed td { color: #a33; }
td.noisy { background: #fff3cd; }
.muted { color: #666; } ul.legend { color: #444; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
"""


def _table(
    block: Block, row_classes: list[str] | None = None, noisy: dict[str, list[bool]] | None = None
) -> str:
    """A block's table as HTML, every cell escaped; `noisy` marks cells per column header."""
    columns = []
    for name, values, r in zip(block.headers, block.columns, block.right, strict=True):
        plain = "<td class=r>" if r else "<td>"
        marked = f'<td class="{"r " if r else ""}noisy">'
        flags = (noisy or {}).get(name) or [False] * len(values)
        escaped = zip(flags, escape_all(values, escape), strict=True)
        columns.append([(marked if f else plain) + v + "</td>" for f, v in escaped])
    classes = row_classes or [""] * len(block.columns[0])
    rows = (
        (f"<tr class={c}>" if c else "<tr>") + "".join(cells) + "</tr>"
        for c, cells in zip(classes, zip(*columns, strict=True), strict=True)
    )
    head = "".join(f"<th>{escape(c)}</th>" for c in block.headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _step_tables(tables: Tables) -> list[str]:
    """One HTML table per comparison group, best and tied rows highlighted, noisy CV marked."""
    step = tables.step
    best = step["best"].astype(bool).to_numpy()
    failed = step["failures"].gt(0).to_numpy()
    tie = step["tie_best"].fillna(False).astype(bool).to_numpy()
    noisy = step["noisy"].astype(bool).to_numpy()
    kind = np.where(best, "best", np.where(failed, "failed", np.where(tie, "tie", "")))
    return [
        f"<h3>{escape(b.title)}</h3>" + _table(b, kind[b.rows].tolist(), {"CV": noisy[b.rows].tolist()})
        for b in tables.blocks.step
        if b.rows is not None
    ]


def _blocks(blocks: list[Block]) -> list[str]:
    """Blocks other than the step tables: title, the line under it, the table."""
    return [f"<h3>{escape(b.title)}</h3><p>{escape(b.note)}</p>" + _table(b) for b in blocks]


def sections(tables: Tables) -> list[str]:
    """The tables' part of the page: step tables and legend, env profiles, cross-host."""
    parts = ["<h2>Configs vs baseline</h2>", *_step_tables(tables)]
    legend = "".join(f"<li>{escape(line.format(cv=tables.noisy_cv * 100))}</li>" for line in LEGEND)
    parts.append(f"<ul class='legend'>{legend}</ul>")
    for heading, blocks in [("Env profiles", tables.blocks.profiles), ("Cross-host", tables.blocks.cross)]:
        if blocks:
            parts.append(f"<h2>{heading}</h2>")
        parts += _blocks(blocks)
    return parts


def page(tables_part: list[str], plots: list[Plot], problems: list[str] | None = None, note: str = "") -> str:
    """The whole report as one HTML document that opens offline, around the `sections` of its tables.

    Apart from `render_html` so that the tables can be laid out while the plots are still drawn.
    """
    parts = [
        f"<h1>specsweep report</h1><p class='muted'>{escape(note)}</p>"
        if note
        else "<h1>specsweep report</h1>"
    ]
    if problems:
        items = "".join(f"<li>{escape(p)}</li>" for p in problems)
        parts.append(f"<h2>Skipped files ({len(problems)})</h2><ul>{items}</ul>")
    parts += tables_part
    if plots:
        parts.append("<h2>Plots</h2>")
    for p in plots:
        data = base64.b64encode(p.png).decode("ascii")
        parts.append(
            f"<figure><img alt='{escape(p.caption)}' src='data:image/png;base64,{data}'><figcaption>"
            f"{escape(p.caption)} <span class='muted'>({escape(p.name)})</span></figcaption></figure>"
        )
    body = "\n".join(parts)
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>specsweep report</title><style>{CSS}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def render_html(tables: Tables, plots: list[Plot], problems: list[str] | None = None, note: str = "") -> str:
    """The whole report as one HTML document that opens offline."""
    return page(sections(tables), plots, problems, note)
