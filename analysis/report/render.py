"""Present the tables: aligned text, markdown, CSV or JSON; the only place numbers round.

Every table of a report becomes a `Block` of display strings once; each format only lays blocks
out. Cells are plain Python lists, not frames: a 10,000-config report has 120,000 cells, and
iterating pandas columns cell by cell costs more than the whole layout.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis import metrics, objectives
from analysis.report.closecall import too_close
from analysis.report.compare import GROUP, is_baseline
from analysis.report.crosshost import FAMILY
from analysis.report.disagree import disagreements
from analysis.report.profiles import profile_table
from analysis.sweep.launchprior import LaunchPrior

MISSING = "–"
FORMATS = ("text", "markdown", "html", "csv", "json")
# (the step table's column, the marks in its cells the line explains, the line): a line is printed
# only where some cell carries one of its marks; one with no marks explains a column always shown.
LEGEND: list[tuple[str, tuple[str, ...], str]] = [
    (
        "",
        ("*", "≈"),
        "* best: highest median {objective} of the configs with no failure; ≈ within noise of the best "
        "(95% CI)",
    ),
    (
        "tok/s/req",
        (),
        "tok/s/req: one request's decode speed (tokens after the first over the time after the first); "
        "total tok/s: every request's output tokens over the measured window",
    ),
    (
        "TPOT p50/p99 ms",
        (),
        "TPOT: per-token latency, (e2e - TTFT) / (output tokens - 1) per request; e2e: send to last token",
    ),
    (
        "speedup [95% CI]",
        ("~", "no CI"),
        "~ within noise: the speedup's 95% CI includes 0; no CI: fewer than 2 good repeats on a side",
    ),
    (
        "CV",
        ("!",),
        "! noisy: per-repeat tok/s vary by more than {cv:g}% (coefficient of variation)",
    ),
    (
        "text vs base",
        (),
        "text vs base: w17 2/8 = 2 of 8 requests differ from the baseline's text, the first at word 17 "
        "(0-based)",
    ),
    (
        "launches",
        (),
        "launches: launches behind the comparison (the fewer side's); with >= 2 the CI is over launch means",
    ),
    (
        "speedup [95% CI]",
        ("¹",),
        "¹ within one launch: no config was launched twice on this host, so the CI says how steady one "
        "launch was, not how far the next run moves; its verdict allows a launch-to-launch spread",
    ),
    (
        "CV",
        ("‡",),
        "‡ unsteady: a launch's first and second half of repeats disagree beyond their noise (99%)",
    ),
    (
        "interfered",
        (),
        "interfered: repeats measured while something else loaded the host (kept in the figures)",
    ),
    (
        "in flight",
        (),
        "in flight: mean requests in flight over the measured window, as the server counted them running "
        "where its metrics said (else as the client sent them)",
    ),
    (
        "in flight",
        ("<",),
        "< not reached: under 90% of the level",
    ),
    (
        "in flight",
        ("q",),
        "q queued: the server kept over 10% of the level waiting in its queue, requests the client "
        "counted in flight",
    ),
]
# The metrics with a header (analysis.metrics) that the step table's own columns below show; any
# other gets a column of its own after `in flight`, explained by its line of the table.
SHOWN = ("decode_tps", "total_tps", "accept_length", "step_time_ms")
EXTRA = [m for m in metrics.LEVEL if m.header and m.name not in SHOWN]
LEGEND += [(str(m.header), (), f"{m.header}: {m.says}") for m in EXTRA]
PROFILE_NOTE = "per env profile: median decode tok/s"
STEP_NOTE = "; step ms: median decode step (draft + verify)"


@dataclass
class Tables:
    """Everything a report shows: the step table, the cross-host view and each host's speed."""

    step: pd.DataFrame
    cross: pd.DataFrame
    speed: pd.DataFrame
    noisy_cv: float = 0.05
    # Views after the others (SLA and goodput, adaptive vs static: analysis.report.deploy).
    extra: list[Block] = dataclasses.field(default_factory=list)

    @functools.cached_property
    def shown(self) -> list[list[str]]:
        """The step table as display strings, column by column (made once, shared by every format)."""
        return cells(self.step)

    @functools.cached_property
    def legend(self) -> list[str]:
        """The legend lines for the marks some step-table cell carries, and those of its columns."""
        by_header = {h: cells for (h, _, _), cells in zip(COLUMNS, self.shown, strict=True)}
        ranked = objectives.get(self.step["objective"].iloc[0] if len(self.step) else None)
        marked = [
            line.format(cv=self.noisy_cv * 100, objective=ranked.name)
            for header, marks, line in LEGEND
            if not marks or any(m in cell for cell in by_header[header] for m in marks)
        ]
        return [*marked, *objective_notes(ranked, disagreements(self.step))]

    @functools.cached_property
    def profiles(self) -> pd.DataFrame:
        """The env-profile view of the step table (empty unless a group measured several profiles)."""
        return profile_table(self.step)

    @functools.cached_property
    def blocks(self) -> Blocks:
        """Every table as display strings (made once, laid out by every format)."""
        return Blocks(step_blocks(self), profile_blocks(self), cross_blocks(self))


def objective_notes(ranked: objectives.Objective, disagree: list[str]) -> list[str]:
    """What speedup, verdict and best are of, why the default is, and where another objective
    says the opposite (analysis.objectives)."""
    why = objectives.WHY_DEFAULT if ranked is objectives.DEFAULT else "chosen with -e objective / --objective"
    head = (
        f"speedup, verdict, best: on {ranked.label()} per repeat, objective={ranked.name} ({why}); "
        f"others: {', '.join(n for n in objectives.NAMES if n != ranked.name)}"
    )
    return [head, *(f"objectives disagree: {line}" for line in disagree)]


@dataclass(frozen=True)
class Block:
    """One table as display strings: a title, an optional line under it, columns of cells."""

    title: str
    headers: list[str]
    columns: list[list[str]]
    right: list[bool]
    note: str = ""
    rows: np.ndarray | None = None  # step tables: the rows' positions in the step table


@dataclass(frozen=True)
class Blocks:
    """A report's tables: one per comparison group, per group under several profiles, per family
    measured on several hosts."""

    step: list[Block]
    profiles: list[Block]
    cross: list[Block]


def num(values: pd.Series, fmt: str) -> list[str]:
    """Numbers formatted for display, a dash where missing."""
    floats = values.to_numpy(dtype="float64", na_value=np.nan).tolist()
    return [MISSING if v != v else format(v, fmt) for v in floats]


def _flags(values: pd.Series) -> list[bool]:
    """A column of true / false / missing as booleans, missing being false."""
    return values.fillna(False).astype(bool).tolist()


def _pair(a: pd.Series, b: pd.Series, fmt: str) -> list[str]:
    """Two numbers as `a/b` (p50/p99), a dash when both are missing."""
    return [
        MISSING if x == y == MISSING else f"{x}/{y}" for x, y in zip(num(a, fmt), num(b, fmt), strict=True)
    ]


def _speedup(t: pd.DataFrame) -> list[str]:
    """`+5.9% [+3.1, +8.8]`, with `~` when within noise and `[no CI]` when there is none."""
    rows = zip(
        num(t["speedup_pct"], "+.1f"),
        num(t["speedup_ci_lo"], "+.1f"),
        num(t["speedup_ci_hi"], "+.1f"),
        _flags(is_baseline(t)),
        _flags(t["within_noise"]),
        strict=True,
    )
    out = []
    one = t["ci_basis"].eq("within_launch").tolist()
    for (pct, lo, hi, base, noise), within in zip(rows, one, strict=True):
        ci = "" if base else "[no CI]" if lo == MISSING else f"[{lo}, {hi}]"
        mark = "¹" if within and lo != MISSING and not base else ""
        out.append(MISSING if pct == MISSING else f"{pct}%{mark} {ci}{' ~' if noise else ''}".strip())
    return out


def _marker(t: pd.DataFrame) -> list[str]:
    """`*` for the best config, `≈` for one tied with it within noise."""
    pairs = zip(_flags(t["best"]), _flags(t["tie_best"]), strict=True)
    return ["*" if best else "≈" if tie else "" for best, tie in pairs]


def _cv(t: pd.DataFrame) -> list[str]:
    """Coefficient of variation, `!` when the cell is noisy."""
    rows = zip(num(t["cv_pct"], ".1f"), _flags(t["noisy"]), _flags(t["unsteady"].gt(0)), strict=True)
    return [
        (cv if cv == MISSING else f"{cv}%") + ("!" if noisy else "") + ("‡" if odd else "")
        for cv, noisy, odd in rows
    ]


def _text(t: pd.DataFrame) -> list[str]:
    """`same 8/8`, `w17 2/8` (2 of 8 differ, first at word 17), `base`, or a dash."""
    rows = zip(
        t["text_compared"].tolist(),
        t["text_diverged"].tolist(),
        t["diverge_word"].tolist(),
        _flags(is_baseline(t)),
        strict=True,
    )
    out = []
    for compared, diverged, word, base in rows:
        if base:
            out.append("base")
        elif pd.isna(compared):
            out.append(MISSING)
        elif pd.isna(diverged) or diverged == 0:
            out.append(f"same {compared}/{compared}")
        else:
            out.append(f"w{word} {diverged}/{compared}")
    return out


def _failures(t: pd.DataFrame) -> list[str]:
    """Failure count with its cause, the cause alone in parentheses, or nothing."""
    pairs = zip(t["failures"].tolist(), t["cause"].astype(object).tolist(), strict=True)
    return [f"{n} {c}" if n > 0 else f"({c})" if isinstance(c, str) else "" for n, c in pairs]


def _in_flight(t: pd.DataFrame) -> list[str]:
    """Mean requests in flight over the window (the server's running count where it gave one), `<`
    where the level was not reached, `q` where the server queued some of it."""
    held = num(t["server_running"].fillna(t["achieved_concurrency"]), ".1f")
    rows = zip(held, t["level_reached"].tolist(), t["queued"].tolist(), strict=True)
    out = []
    for shown, reached, queued in rows:
        marks = ("<" if reached is False else "") + ("q" if queued is True else "")
        out.append(f"{shown} {marks}" if marks else shown)
    return out


# (header, right-aligned?, how to make the column's cells from the step table)
Column = tuple[str, bool, Callable[[pd.DataFrame], list[str]]]


def _metric(m: metrics.Metric) -> Column:
    """A metric's own column (analysis.metrics): its header, its step-table column in its format."""
    assert m.header is not None, f"{m.name}: no header in analysis.metrics"
    return m.header, True, lambda t: num(t[m.level_column], m.fmt)


def step_columns(extra: Sequence[metrics.Metric]) -> list[Column]:
    """The terminal step table's columns: the latency pairs and `in flight` combine metrics, and
    each metric of `extra` has a column of its own after `in flight`."""
    return [
        ("", False, _marker),
        ("config", False, lambda t: t["config"].astype(str).tolist()),
        _metric(metrics.get("decode_tps")),
        ("speedup [95% CI]", False, _speedup),
        _metric(metrics.get("total_tps")),
        _metric(metrics.get("accept_length")),
        ("TTFT p50/p99 ms", True, lambda t: _pair(t["ttft_p50_ms"], t["ttft_p99_ms"], ".0f")),
        ("TPOT p50/p99 ms", True, lambda t: _pair(t["tpot_p50_ms"], t["tpot_p99_ms"], ".1f")),
        ("e2e p50/p99 s", True, lambda t: _pair(t["e2e_p50_ms"] / 1000.0, t["e2e_p99_ms"] / 1000.0, ".2f")),
        _metric(metrics.get("step_time_ms")),
        ("CV", True, _cv),
        ("in flight", True, _in_flight),
        *(_metric(m) for m in extra),
        ("runs ok", True, lambda t: [str(n) for n in t["repeats_ok"].tolist()]),
        ("launches", True, lambda t: [str(n) for n in t["launches"].tolist()]),
        ("interfered", True, lambda t: [str(n) for n in t["interfered"].tolist()]),
        ("text vs base", False, _text),
        ("failures", False, _failures),
    ]


COLUMNS = step_columns(EXTRA)


# Shown in a group's table only where some row has a value (SGLang records step times, llama.cpp none).
OPTIONAL = ("step ms",)


def cells(table: pd.DataFrame) -> list[list[str]]:
    """The step table as display strings: one list per COLUMNS entry, one string per row."""
    return [make(table) for _, _, make in COLUMNS]


def title(key: tuple[object, ...]) -> str:
    """One line naming a group: sweep, host, engine and model, workload (where named), concurrency."""
    sweep, host, engine, model, workload, conc = (MISSING if pd.isna(k) else k for k in key)
    load = f"workload {workload} | " if workload != MISSING else ""
    return f"sweep {sweep} | host {host} | {engine} {model} | {load}concurrency {conc}"


def groups(table: pd.DataFrame) -> list[tuple[tuple[object, ...], np.ndarray]]:
    """Each comparison group's key and row positions, groups in order of first appearance."""
    codes = table.groupby(GROUP, dropna=False, sort=False).ngroup().to_numpy()
    order = np.argsort(codes, kind="stable")
    parts = np.split(order, np.flatnonzero(np.diff(codes[order])) + 1) if len(order) else []
    # A missing value (no workload) as None: NaN keys of two frames would not compare equal.
    keys = list(
        zip(*(table[c].astype(object).where(table[c].notna(), None).tolist() for c in GROUP), strict=True)
    )
    return [(keys[p[0]], p) for p in parts]


def step_blocks(tables: Tables) -> list[Block]:
    """One block per comparison group of the step table."""
    out = []
    for key, rows in groups(tables.step):
        shown = [
            (header or "best", r, part)
            for (header, r, _), column in zip(COLUMNS, tables.shown, strict=True)
            if (part := [column[i] for i in rows])
            and not (header in OPTIONAL and all(c == MISSING for c in part))
        ]
        headers, right, columns = (list(x) for x in zip(*shown, strict=True))
        out.append(Block(title(key), headers, columns, right, drift_note(tables.step, rows), rows))
    return out


def drift_note(step: pd.DataFrame, rows: np.ndarray) -> str:
    """The group's baseline drift between its first and last launch, and the launch spread used."""
    first = step.iloc[rows[0]]
    if pd.isna(first["drift_pct"]):
        return prior_note(step, rows)
    word = "DRIFTING (every interval allows the baseline's drift)" if first["drifting"] else "within noise"
    drift = f"{first['drift_pct']:+.1f}% [{first['drift_ci_lo']:+.1f}, {first['drift_ci_hi']:+.1f}]"
    return (
        f"baseline drift, last launch vs first: {drift}, {word}; launch-to-launch CV "
        f"{first['launch_cv_pct']:.1f}% ({first['launch_df']:.0f} df)"
    )


def prior_note(step: pd.DataFrame, rows: np.ndarray) -> str:
    """Where the group measured no config twice (the baseline not again either): the launch spread
    from the host's earlier sweeps its verdicts allowed (analysis.running.prior), and the close calls
    too close to call at it (analysis.report.closecall)."""
    group = step.iloc[rows]
    cv, df = group["launch_prior_cv_pct"].iloc[0], group["launch_prior_df"].iloc[0]
    # The assumed spread (no df) is the legend's: only a spread from history is named here.
    if not group["ci_basis"].eq("within_launch").any() or pd.isna(df):
        return ""
    known = LaunchPrior(cv_pct=float(cv), df=float(df), source="", from_history=True)
    return "; ".join([
        f"one launch per config, the baseline's too: verdicts allow a launch-to-launch CV of {cv:.1f}% "
        f"(the host's earlier sweeps, {df:.0f} df; a sweep's drift included)",
        *too_close(group, known),
    ])  # fmt: skip


def profile_blocks(tables: Tables) -> list[Block]:
    """One block per group measured under several env profiles: a row per grid point, a column pair
    (tok/s, step ms) per profile; step ms only where some step time was recorded."""
    wide = tables.profiles
    if wide.empty:
        return []
    keys = wide.index.to_frame(index=False)
    labels = keys["config"].astype(str).tolist()
    shown = {c: num(wide[c], ".1f") for c in wide.columns}
    recorded = wide["step_ms"].notna().to_numpy()
    profiles = list(dict.fromkeys(wide.columns.get_level_values(1)))
    # A group's own profiles (one whose configs all failed included: its column says so).
    step_profiles = tables.step["env_profile"].to_numpy()
    measured = {key: set(step_profiles[rows]) for key, rows in groups(tables.step)}
    out = []
    for key, rows in groups(keys):
        steps = bool(recorded[rows].any())
        headers, columns = ["config"], [[labels[i] for i in rows]]
        for p in (p for p in profiles if p in measured[key]):
            for metric, unit in [("decode_tps", "tok/s"), ("step_ms", "step ms")]:
                if metric == "decode_tps" or steps:
                    headers.append(f"{p} {unit}")
                    columns.append([shown[(metric, p)][i] for i in rows])
        right = [False, *([True] * (len(headers) - 1))]
        note = PROFILE_NOTE + (STEP_NOTE if steps else "")
        out.append(Block(f"env profiles | {title(key)}", headers, columns, right, note))
    return out


def cross_blocks(tables: Tables) -> list[Block]:
    """Cross-host views, one per family measured on several hosts."""
    out = []
    speed = tables.speed.set_index([*FAMILY, "host"])
    for key, part in tables.cross.groupby(FAMILY, dropna=False, sort=False):
        sweep, engine, model, workload, conc = key
        hosts = [
            c for c in part.columns if c not in (*FAMILY, "config", "fleet_median", "spread_pct", "slowest")
        ]
        hosts = [h for h in hosts if part[h].notna().any()]
        shown = {"config": part["config"].astype(str).tolist()}
        shown |= {str(h): num(part[h], ".1f") for h in hosts}
        shown["fleet median"] = num(part["fleet_median"], ".1f")
        shown["spread"] = [f"{v}%" for v in num(part["spread_pct"], ".1f")]
        shown["slowest"] = part["slowest"].astype(str).tolist()
        rel = [(h, speed.loc[(*key, h)]) for h in hosts if (*key, h) in speed.index]
        flag = [f"{h} {r['relative_pct']:+.1f}%{' SLOW' if r['slow'] else ''}" for h, r in rel]
        load = "" if pd.isna(workload) else f" | workload {workload}"
        name = f"cross-host | sweep {sweep} | {engine} {model}{load} | concurrency {conc}"
        right = [False, *([True] * (len(shown) - 2)), False]
        note = f"host speed vs fleet median: {', '.join(flag)}"
        out.append(Block(name, list(shown), list(shown.values()), right, note))
    return out


def _aligned(block: Block) -> list[str]:
    """A block's table as aligned lines, header first (padded column by column)."""
    padded = []
    for name, values, r in zip(block.headers, block.columns, block.right, strict=True):
        width = max(len(name), *map(len, values)) if values else len(name)
        pad = str.rjust if r else str.ljust
        padded.append([pad(name, width), *(pad(v, width) for v in values)])
    return ["  ".join(row).rstrip() for row in zip(*padded, strict=True)]


def render_text(tables: Tables) -> str:
    """Aligned plain-text tables, one per group, then the profile and cross-host views, for a terminal."""
    made = tables.blocks
    # The best / tie column has no header on a terminal: it is one character wide.
    step = [dataclasses.replace(b, headers=["", *b.headers[1:]]) for b in made.step]
    text = [
        "\n".join([b.title, *([b.note] if b.note else []), *_aligned(b)])
        for b in [*step, *made.profiles, *made.cross, *tables.extra]
    ]
    return "\n\n".join([*text, "\n".join(tables.legend)]) + "\n"


def _md_escape(cell: str) -> str:
    """A cell safe inside a markdown table row."""
    return cell.replace("|", "\\|").replace("*", "\\*").replace("~", "\\~")


def escape_all(values: list[str], escape: Callable[[str], str]) -> list[str]:
    """`escape` applied to every value, as one call on them all joined (by NUL, which no cell
    holds and no escape touches): a few C-level passes instead of a Python call per cell. The same
    list when nothing needed escaping, as in most columns of numbers: no splitting it up again."""
    joined = "\0".join(values)
    escaped = escape(joined)
    return values if escaped == joined else escaped.split("\0")


def _md_table(block: Block) -> list[str]:
    """A block's table as GitHub-flavoured markdown lines."""
    columns = [escape_all(values, _md_escape) for values in block.columns]
    head = "| " + " | ".join(_md_escape(c) for c in block.headers) + " |"
    align = "| " + " | ".join("---:" if r else "---" for r in block.right) + " |"
    return [head, align, *("| " + " | ".join(row) + " |" for row in zip(*columns, strict=True))]


def render_markdown(tables: Tables) -> str:
    """GitHub-flavoured markdown tables, one per group, then the profile and cross-host views."""
    made = tables.blocks
    text = [
        "\n".join([f"### {b.title}", "", *([_md_escape(b.note), ""] if b.note else []), *_md_table(b)])
        for b in [*made.step, *made.profiles, *made.cross, *tables.extra]
    ]
    legend = "\n".join(f"- {_md_escape(line)}" for line in tables.legend)
    return "\n\n".join([*text, legend]) + "\n"


def layout(blocks: list[Block], fmt: str) -> str:
    """Blocks other than a report's (e.g. `recommend`'s) as aligned text or markdown tables."""
    if fmt == "markdown":
        parts = [
            [f"### {b.title}", "", *([_md_escape(b.note), ""] if b.note else []), *_md_table(b)]
            for b in blocks
        ]
    else:
        parts = [[b.title, *([b.note] if b.note else []), *_aligned(b)] for b in blocks]
    return "\n\n".join("\n".join(p) for p in parts) + "\n"


def render(tables: Tables, fmt: str) -> str:
    """The tables as text, markdown, CSV or JSON (HTML, with plots: analysis.report.html)."""
    # CSV and JSON carry the step table at full precision, for machines (the profile view is
    # a pivot of its env_profile, decode_tps and step_ms columns).
    if fmt == "text":
        return render_text(tables)
    if fmt == "markdown":
        return render_markdown(tables)
    if fmt == "csv":
        return tables.step.to_csv(index=False)
    if fmt == "json":
        return tables.step.to_json(orient="records", indent=2) + "\n"
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
