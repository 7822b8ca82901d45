"""A self-contained HTML report: inline CSS, plots as base64 PNG data URIs, no external URL."""

from __future__ import annotations

import base64
from html import escape

import pandas as pd

from analysis.figures import Plot
from analysis.render import COLUMNS, LEGEND, Tables, cross_blocks, groups

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


def _table(frame: pd.DataFrame, right: list[bool], row_classes: list[str] | None = None,
           noisy: dict[str, list[bool]] | None = None) -> str:  # fmt: skip
    """A display frame as an HTML table, every cell escaped; `noisy` marks cells per column."""
    columns = []
    for name, r in zip(frame.columns, right, strict=True):
        flags = (noisy or {}).get(name) or [False] * len(frame)
        opens = [
            f'<td class="{"r " if r else ""}noisy">' if f else ("<td class=r>" if r else "<td>")
            for f in flags
        ]
        columns.append([o + escape(str(v)) + "</td>" for o, v in zip(opens, frame[name], strict=True)])
    classes = row_classes or [""] * len(frame)
    rows = (
        (f"<tr class={c}>" if c else "<tr>") + "".join(cells) + "</tr>"
        for c, cells in zip(classes, zip(*columns, strict=True), strict=True)
    )
    head = "".join(f"<th>{escape(str(c))}</th>" for c in frame.columns)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _step_tables(tables: Tables) -> list[str]:
    """One HTML table per comparison group, best and tied rows highlighted, noisy CV marked."""
    right = [r for _, r, _ in COLUMNS]
    out = []
    for title, part in groups(tables.step):
        rows = [
            "best" if b else "failed" if f else "tie" if bool(t) else ""
            for b, f, t in zip(
                part["best"], part["failures"].gt(0), part["tie_best"].fillna(False), strict=True
            )
        ]
        noisy = {"CV": part["noisy"].astype(bool).tolist()}
        out.append(f"<h3>{escape(title)}</h3>" + _table(tables.shown.loc[part.index], right, rows, noisy))
    return out


def render_html(tables: Tables, plots: list[Plot], problems: list[str] | None = None, note: str = "") -> str:
    """The whole report as one HTML document that opens offline."""
    parts = [
        f"<h1>specsweep report</h1><p class='muted'>{escape(note)}</p>"
        if note
        else "<h1>specsweep report</h1>"
    ]
    if problems:
        items = "".join(f"<li>{escape(p)}</li>" for p in problems)
        parts.append(f"<h2>Skipped files ({len(problems)})</h2><ul>{items}</ul>")
    parts.append("<h2>Configs vs baseline</h2>")
    parts += _step_tables(tables)
    legend = "".join(f"<li>{escape(line.format(cv=tables.noisy_cv * 100))}</li>" for line in LEGEND)
    parts.append(f"<ul class='legend'>{legend}</ul>")
    blocks = cross_blocks(tables)
    if blocks:
        parts.append("<h2>Cross-host</h2>")
    for name, frame in blocks:
        head, speed = name.split("\n")
        right = [False, *([True] * (len(frame.columns) - 2)), False]
        parts.append(f"<h3>{escape(head)}</h3><p>{escape(speed)}</p>" + _table(frame, right))
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
