"""Present a step table: aligned text, markdown, CSV or JSON; the only place numbers round."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from analysis.compare import GROUP

MISSING = "–"
FORMATS = ("text", "markdown", "csv", "json")
BEST_NOTE = "* best: highest median decode tok/s among configs with no failure"


def _num(value: object, fmt: str) -> str:
    """One number formatted for display, or a dash when it is missing."""
    return MISSING if pd.isna(value) else format(value, fmt)


def _pct(value: object) -> str:
    """A signed percentage, or a dash when there was no baseline to compare with."""
    return MISSING if pd.isna(value) else f"{value:+.1f}%"


def _failures(row: pd.Series) -> str:
    """Failure count with its cause, or nothing when the config never failed."""
    if row["failures"]:
        return f"{row['failures']} {row['cause']}"
    return f"({row['cause']})" if isinstance(row["cause"], str) else ""


# (header, right-aligned?, how to make the cell from a table row)
COLUMNS: list[tuple[str, bool, Callable[[pd.Series], str]]] = [
    ("", False, lambda r: "*" if r["best"] else ""),
    ("config", False, lambda r: str(r["config"])),
    ("tok/s", True, lambda r: _num(r["decode_tps"], ".1f")),
    ("speedup", True, lambda r: _pct(r["speedup_pct"])),
    ("accept len", True, lambda r: _num(r["accept_length"], ".2f")),
    ("TTFT p50 ms", True, lambda r: _num(r["ttft_p50_ms"], ".1f")),
    ("runs ok", True, lambda r: str(r["repeats_ok"])),
    ("failures", False, _failures),
]


def _cells(table: pd.DataFrame) -> list[list[str]]:
    """The table's rows as display strings, in COLUMNS order."""
    return [[make(row) for _, _, make in COLUMNS] for _, row in table.iterrows()]


def _title(key: tuple[object, ...]) -> str:
    """One line naming a group: sweep, host, engine and model, concurrency."""
    sweep, host, engine, model, conc = (MISSING if pd.isna(k) else k for k in key)
    return f"sweep {sweep} | host {host} | {engine} {model} | concurrency {conc}"


def _groups(table: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The table split per comparison group, in table order."""
    grouped = table.groupby(GROUP, dropna=False, sort=False)
    return [(_title(key), part) for key, part in grouped]


def render_text(table: pd.DataFrame) -> str:
    """Aligned plain-text tables, one per group, for a terminal."""
    blocks = []
    for title, part in _groups(table):
        rows = [[h for h, _, _ in COLUMNS], *_cells(part)]
        widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
        lines = [
            "  ".join(
                cell.rjust(w) if right else cell.ljust(w)
                for cell, w, (_, right, _) in zip(r, widths, COLUMNS, strict=True)
            ).rstrip()
            for r in rows
        ]
        blocks.append("\n".join([title, *lines]))
    return "\n\n".join([*blocks, BEST_NOTE]) + "\n"


def _md_escape(cell: str) -> str:
    """A cell safe inside a markdown table row."""
    return cell.replace("|", "\\|").replace("*", "\\*")


def render_markdown(table: pd.DataFrame) -> str:
    """GitHub-flavoured markdown tables, one per group."""
    blocks = []
    for title, part in _groups(table):
        header = [h or "best" for h, _, _ in COLUMNS]
        align = ["---:" if right else "---" for _, right, _ in COLUMNS]
        rows = [header, align, *_cells(part)]
        lines = ["| " + " | ".join(_md_escape(c) for c in r) + " |" for r in rows]
        blocks.append("\n".join([f"### {title}", "", *lines]))
    return "\n\n".join([*blocks, _md_escape(BEST_NOTE)]) + "\n"


def render(table: pd.DataFrame, fmt: str) -> str:
    """The table in one of FORMATS; CSV and JSON keep full precision for machines."""
    if fmt == "text":
        return render_text(table)
    if fmt == "markdown":
        return render_markdown(table)
    if fmt == "csv":
        return table.to_csv(index=False)
    if fmt == "json":
        return table.to_json(orient="records", indent=2) + "\n"
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
