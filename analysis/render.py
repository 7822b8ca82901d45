"""Present the tables: aligned text, markdown, CSV or JSON; the only place numbers round."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from analysis.compare import GROUP
from analysis.crosshost import FAMILY

MISSING = "–"
FORMATS = ("text", "markdown", "html", "csv", "json")
LEGEND = [
    "* best: highest median tok/s of the configs with no failure; ≈ within noise of the best (95% CI)",
    "~ within noise: the speedup's 95% CI includes 0; no CI: fewer than 2 good repeats on a side",
    "! noisy: per-repeat tok/s vary by more than {cv:g}% (coefficient of variation)",
    "text vs base: w17 2/8 = 2 of 8 requests differ from the baseline's text, the first at word 17 (0-based)",
]


@dataclass
class Tables:
    """Everything a report shows: the step table, the cross-host view and each host's speed."""

    step: pd.DataFrame
    cross: pd.DataFrame
    speed: pd.DataFrame
    noisy_cv: float = 0.05

    @functools.cached_property
    def shown(self) -> pd.DataFrame:
        """The step table as display strings (made once, shared by every format)."""
        return cells(self.step)


def num(values: pd.Series, fmt: str) -> pd.Series:
    """Numbers formatted for display, a dash where missing."""
    return pd.Series([MISSING if pd.isna(v) else format(v, fmt) for v in values], index=values.index)


def _pair(a: pd.Series, b: pd.Series, fmt: str) -> pd.Series:
    """Two numbers as `a/b` (p50/p99), a dash when both are missing."""
    both = num(a, fmt) + "/" + num(b, fmt)
    return both.where(a.notna() | b.notna(), MISSING)


def _speedup(t: pd.DataFrame) -> pd.Series:
    """`+5.9% [+3.1, +8.8]`, with `~` when within noise and `[no CI]` when there is none."""
    pct = num(t["speedup_pct"], "+.1f") + "%"
    ci = "[" + num(t["speedup_ci_lo"], "+.1f") + ", " + num(t["speedup_ci_hi"], "+.1f") + "]"
    ci = ci.where(t["speedup_ci_lo"].notna(), "[no CI]").where(~is_base(t), "")
    noise = t["within_noise"].fillna(False).astype(bool).map({True: " ~", False: ""})
    return (pct + " " + ci + noise).str.strip().where(t["speedup_pct"].notna(), MISSING)


def is_base(t: pd.DataFrame) -> pd.Series:
    """Rows that are their group's baseline (speedup 0 against themselves)."""
    return ~t["speculative"].astype(bool) & t["env_profile"].eq("default")


def _marker(t: pd.DataFrame) -> pd.Series:
    """`*` for the best config, `≈` for one tied with it within noise."""
    tie = t["tie_best"].fillna(False).astype(bool)
    return pd.Series("", index=t.index).mask(tie, "≈").mask(t["best"].astype(bool), "*")


def _cv(t: pd.DataFrame) -> pd.Series:
    """Coefficient of variation, `!` when the cell is noisy."""
    return (num(t["cv_pct"], ".1f") + "%").where(t["cv_pct"].notna(), MISSING) + t["noisy"].map(
        {True: "!", False: ""}
    )


def _text(t: pd.DataFrame) -> pd.Series:
    """`same 8/8`, `w17 2/8` (2 of 8 differ, first at word 17), `base`, or a dash."""
    same = "same " + t["text_compared"].astype(str) + "/" + t["text_compared"].astype(str)
    diff = "w" + t["diverge_word"].astype(str) + " " + t["text_diverged"].astype(str) + "/"
    diff = diff + t["text_compared"].astype(str)
    out = same.where(t["text_diverged"].fillna(0).eq(0), diff)
    return out.where(t["text_compared"].notna(), MISSING).mask(is_base(t), "base")


def _failures(t: pd.DataFrame) -> pd.Series:
    """Failure count with its cause, the cause alone in parentheses, or nothing."""
    cause = t["cause"].astype(object)
    has_cause = cause.map(lambda c: isinstance(c, str))
    count = t["failures"].astype(str) + " " + cause.astype(str)
    return count.where(t["failures"].gt(0), ("(" + cause.astype(str) + ")").where(has_cause, ""))


# (header, right-aligned?, how to make the column's cells from the step table)
COLUMNS: list[tuple[str, bool, Callable[[pd.DataFrame], pd.Series]]] = [
    ("", False, _marker),
    ("config", False, lambda t: t["config"].astype(str)),
    ("tok/s", True, lambda t: num(t["decode_tps"], ".1f")),
    ("speedup [95% CI]", False, _speedup),
    ("accept len", True, lambda t: num(t["accept_length"], ".2f")),
    ("TTFT p50/p99 ms", True, lambda t: _pair(t["ttft_p50_ms"], t["ttft_p99_ms"], ".0f")),
    ("ITL p50/p99 ms", True, lambda t: _pair(t["itl_p50_ms"], t["itl_p99_ms"], ".1f")),
    ("step ms", True, lambda t: num(t["step_ms"], ".1f")),
    ("CV", True, _cv),
    ("runs ok", True, lambda t: t["repeats_ok"].astype(str)),
    ("text vs base", False, _text),
    ("failures", False, _failures),
]


def cells(table: pd.DataFrame) -> pd.DataFrame:
    """The step table as display strings, one column per COLUMNS entry."""
    return pd.DataFrame({h or "best": make(table) for h, _, make in COLUMNS}, index=table.index)


def title(key: tuple[object, ...]) -> str:
    """One line naming a group: sweep, host, engine and model, concurrency."""
    sweep, host, engine, model, conc = (MISSING if pd.isna(k) else k for k in key)
    return f"sweep {sweep} | host {host} | {engine} {model} | concurrency {conc}"


def groups(table: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The table split per comparison group, in table order."""
    grouped = table.groupby(GROUP, dropna=False, sort=False)
    return [(title(key), part) for key, part in grouped]


def cross_blocks(tables: Tables) -> list[tuple[str, pd.DataFrame]]:
    """Cross-host views as (title, display frame), one per family measured on several hosts."""
    out = []
    speed = tables.speed.set_index([*FAMILY, "host"])
    for key, part in tables.cross.groupby(FAMILY, dropna=False, sort=False):
        sweep, engine, model, conc = key
        hosts = [
            c for c in part.columns if c not in (*FAMILY, "config", "fleet_median", "spread_pct", "slowest")
        ]
        hosts = [h for h in hosts if part[h].notna().any()]
        shown = pd.DataFrame({"config": part["config"].astype(str)})
        for h in hosts:
            shown[str(h)] = num(part[h], ".1f")
        shown["fleet median"] = num(part["fleet_median"], ".1f")
        shown["spread"] = num(part["spread_pct"], ".1f") + "%"
        shown["slowest"] = part["slowest"].astype(str)
        rel = [(h, speed.loc[(*key, h)]) for h in hosts if (*key, h) in speed.index]
        flag = [f"{h} {r['relative_pct']:+.1f}%{' SLOW' if r['slow'] else ''}" for h, r in rel]
        name = f"cross-host | sweep {sweep} | {engine} {model} | concurrency {conc}"
        out.append((f"{name}\nhost speed vs fleet median: {', '.join(flag)}", shown))
    return out


def _aligned(frame: pd.DataFrame, right: list[bool]) -> list[str]:
    """A display frame as aligned lines, header first (padded column by column)."""
    columns = []
    for name, r in zip(frame.columns, right, strict=True):
        values = [str(name), *frame[name].astype(str)]
        width = max(map(len, values))
        columns.append([v.rjust(width) if r else v.ljust(width) for v in values])
    return ["  ".join(row).rstrip() for row in zip(*columns, strict=True)]


def render_text(tables: Tables) -> str:
    """Aligned plain-text tables, one per group, then the cross-host views, for a terminal."""
    right = [r for _, r, _ in COLUMNS]
    shown = tables.shown.rename(columns={"best": ""})
    blocks = ["\n".join([t, *_aligned(shown.loc[part.index], right)]) for t, part in groups(tables.step)]
    for name, frame in cross_blocks(tables):
        align = [False, *([True] * (len(frame.columns) - 2)), False]
        blocks.append("\n".join([name, *_aligned(frame, align)]))
    legend = "\n".join(line.format(cv=tables.noisy_cv * 100) for line in LEGEND)
    return "\n\n".join([*blocks, legend]) + "\n"


def _md_escape(cell: str) -> str:
    """A cell safe inside a markdown table row."""
    return cell.replace("|", "\\|").replace("*", "\\*").replace("~", "\\~")


def _md_table(frame: pd.DataFrame, right: list[bool]) -> list[str]:
    """A display frame as GitHub-flavoured markdown table lines."""
    columns = [[_md_escape(str(c)) for c in frame[name].astype(str)] for name in frame.columns]
    head = "| " + " | ".join(_md_escape(str(c)) for c in frame.columns) + " |"
    align = "| " + " | ".join("---:" if r else "---" for r in right) + " |"
    return [head, align, *("| " + " | ".join(row) + " |" for row in zip(*columns, strict=True))]


def render_markdown(tables: Tables) -> str:
    """GitHub-flavoured markdown tables, one per group, then the cross-host views."""
    right = [r for _, r, _ in COLUMNS]
    shown = tables.shown
    blocks = [
        "\n".join([f"### {t}", "", *_md_table(shown.loc[part.index], right)])
        for t, part in groups(tables.step)
    ]
    for name, frame in cross_blocks(tables):
        head, speed = name.split("\n")
        align = [False, *([True] * (len(frame.columns) - 2)), False]
        blocks.append("\n".join([f"### {head}", "", _md_escape(speed), "", *_md_table(frame, align)]))
    legend = "\n".join(f"- {_md_escape(line.format(cv=tables.noisy_cv * 100))}" for line in LEGEND)
    return "\n\n".join([*blocks, legend]) + "\n"


def render(tables: Tables, fmt: str) -> str:
    """The tables as text, markdown, CSV or JSON (HTML, with plots: analysis.html)."""
    # CSV and JSON carry the step table at full precision, for machines.
    if fmt == "text":
        return render_text(tables)
    if fmt == "markdown":
        return render_markdown(tables)
    if fmt == "csv":
        return tables.step.to_csv(index=False)
    if fmt == "json":
        return tables.step.to_json(orient="records", indent=2) + "\n"
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
