"""Static PNG plots of a step table (matplotlib's Agg renderer: no display, no browser, no JS).

Figures are made with `matplotlib.figure.Figure` and the Agg canvas directly, never pyplot: no
global figure state, nothing to close, and pyplot's import cost is not paid. One "family" is a
(sweep, engine, model, concurrency); each gets up to four plots.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib import rc_context
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from analysis import cache, forks
from analysis.hostorder import natural, natural_key
from analysis.report import loadplots
from analysis.report.crosshost import FAMILY
from analysis.report.figures import layout, legend_inches, png, slug, title
from analysis.report.plotfile import Plot

MAX_LINES = 8  # lines per axes before hosts are summarised (each host's best per step count)
MAX_FAMILIES = 6  # families plotted per report; the tables still cover every one
# Unhinted glyphs: laying out and drawing text is most of what a figure costs, and hinting (FreeType
# running each glyph's own instructions) makes it about a third dearer, for differences a 100-dpi
# PNG hardly shows.
STYLE = {"text.hinting": "no_hinting"}


def _lines(spec: pd.DataFrame) -> tuple[list[tuple[str, str, pd.DataFrame]], str]:
    """(label, host, points by step count) per line, and a note when lines were summarised."""
    hosts = natural(spec["host"].unique())
    series = ["topk", "env_profile"]
    multi = [c for c in series if spec[c].nunique(dropna=False) > 1]
    per_line = [*(["host"] if len(hosts) > 1 else []), *multi]
    note = ""
    if spec.groupby(["host", *multi], dropna=False).ngroups > MAX_LINES:
        per_line, note = ["host"], "each host's best config per step count"
        if len(hosts) > MAX_LINES:
            hosts = hosts[:MAX_LINES]
            note += f"; first {MAX_LINES} of {spec['host'].nunique()} hosts"
    spec = spec[spec["host"].isin(hosts)]
    lines = []
    for key, part in spec.groupby(per_line or ["host"], dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        names = dict(zip(per_line or ["host"], key, strict=True))
        label = ", ".join(
            f"{c} {v}" if c in ("topk",) else str(v)
            for c, v in names.items()
            if c != "host" or len(hosts) > 1
        )
        # Several configs at one step count (draft tokens, top-k): show the fastest.
        best = part.sort_values("score", ascending=False).drop_duplicates("steps").sort_values("steps")
        lines.append((label or "speculative", str(part["host"].iloc[0]), best))
    lines.sort(key=lambda line: natural_key(line[1]))  # stable: a host's series keep their order
    return lines, note


def _styles(lines: list[tuple[str, str, pd.DataFrame]]) -> list[dict[str, str]]:
    """Per line: one colour per host (per series when there is one host), line and marker per series."""
    hosts = list(dict.fromkeys(h for _, h, _ in lines))
    seen: dict[str, int] = {}
    out = []
    for i, (_, host, _) in enumerate(lines):
        k = seen[host] = seen.get(host, -1) + 1
        color = f"C{hosts.index(host) % 10}" if len(hosts) > 1 else f"C{i % 10}"
        out.append({"color": color, "ls": ("-", "--", "-.", ":")[k % 4], "marker": "os^D"[k % 4]})
    return out


def _clip_y(ax: Any, lines: list[tuple[str, str, pd.DataFrame]], baselines: pd.Series) -> bool:
    """Fit the y axis to the medians, not to huge intervals (2 repeats: t = 12.7); True if clipped."""
    y = pd.concat([pts["score"] for _, _, pts in lines] + [baselines.dropna()])
    lo_ci = pd.concat([pts["tps_ci_lo"] for _, _, pts in lines]).min()
    hi_ci = pd.concat([pts["tps_ci_hi"] for _, _, pts in lines]).max()
    floor, ceil = 0.5 * y.min(), 1.5 * y.max()
    lo = max(lo_ci if pd.notna(lo_ci) else y.min(), floor)
    hi = min(hi_ci if pd.notna(hi_ci) else y.max(), ceil)
    pad = 0.08 * max(hi - lo, 0.05 * y.max())
    ax.set_ylim(min(lo, y.min()) - pad, max(hi, y.max()) + pad)
    return bool((pd.notna(lo_ci) and lo_ci < floor) or (pd.notna(hi_ci) and hi_ci > ceil))


def _finish_steps_axes(fig: Figure, ax: Any, key: tuple[object, ...], note: str, ylabel: str) -> None:
    """Labels, title, grid, legend and margins shared by the plots over step counts."""
    ax.set_xlabel("speculative steps")
    ax.set_ylabel(ylabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title(key) + (f"\n({note})" if note else ""), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    layout(fig, 0.8, legend_inches(ax), 0.75 if note else 0.45, 0.55)


def tokps_vs_steps(part: pd.DataFrame, key: tuple[object, ...], name: str) -> Plot | None:
    """The objective's median by step count with 95% CI bars, each host's baseline as a dashed line."""
    spec = part[part["speculative"].astype(bool) & part["steps"].notna() & part["score"].notna()]
    if spec.empty:
        return None
    lines, note = _lines(spec)
    fig = Figure(figsize=(8, 4.6))
    ax = fig.add_subplot()
    styles = _styles(lines)
    for (label, _, pts), style in zip(lines, styles, strict=True):
        x = pts["steps"].astype(float).to_numpy()
        y = pts["score"].to_numpy(dtype=float)
        err = np.vstack(
            [y - pts["tps_ci_lo"].to_numpy(dtype=float), pts["tps_ci_hi"].to_numpy(dtype=float) - y]
        )
        ax.errorbar(x, y, yerr=np.nan_to_num(err), capsize=3, label=label, **style)
    colors = {host: style["color"] for (_, host, _), style in zip(lines, styles, strict=True)}
    base = part[
        ~part["speculative"].astype(bool) & part["env_profile"].eq("default") & part["host"].isin(colors)
    ]
    for _, row in base.dropna(subset=["score"]).iterrows():
        several = len(colors) > 1
        color = colors[row["host"]] if several else "0.3"
        who = f"{row['host']} " if several else ""
        ax.axhline(row["score"], ls=":", lw=1.8, color=color, label=f"{who}baseline {row['score']:.1f}")
    if _clip_y(ax, lines, base["score"]):
        note = ", ".join(filter(None, [note, "some CI bars run off the axes: few repeats"]))
    _finish_steps_axes(fig, ax, key, note, f"median {part['objective'].iloc[0]} (95% CI)")
    return Plot(
        name, "The objective vs speculative steps (bars: 95% CI over repeats; dotted: baseline)", png(fig)
    )


def accept_vs_steps(part: pd.DataFrame, key: tuple[object, ...], name: str) -> Plot | None:
    """Mean accept length by step count, one line per host or series."""
    spec = part[part["speculative"].astype(bool) & part["steps"].notna() & part["accept_length"].notna()]
    if spec.empty:
        return None
    lines, note = _lines(spec.assign(score=spec["score"].fillna(0.0)))
    fig = Figure(figsize=(8, 4.6))
    ax = fig.add_subplot()
    top = 1.0
    for (label, _, pts), style in zip(lines, _styles(lines), strict=True):
        ax.plot(pts["steps"].astype(float), pts["accept_length"], label=label, alpha=0.85, **style)
        top = max(top, float(pts["steps"].max()) + 1)
    ax.plot([0, top - 1], [1, top], ls=":", color="0.5", label="every draft accepted (steps + 1)")
    ax.set_xlim(0.5, top - 0.5)
    _finish_steps_axes(fig, ax, key, note, "accept length (tokens per verify step)")
    return Plot(name, "Accept length vs speculative steps (dotted: the most a step count allows)", png(fig))


def speedup_heatmap(part: pd.DataFrame, key: tuple[object, ...], name: str) -> Plot | None:
    """Speedup % over a steps x top-k grid (best draft-token count per cell; median over hosts)."""
    spec = part[part["speculative"].astype(bool) & part["steps"].notna() & part["topk"].notna()]
    if spec["topk"].nunique() < 2 or spec["speedup_pct"].notna().sum() == 0:
        return None
    best = spec.groupby(["host", "steps", "topk"])["speedup_pct"].max()
    grid = best.groupby(["steps", "topk"]).median().unstack("topk").sort_index()
    values = grid.to_numpy(dtype=float)
    span = max(float(np.nanmax(np.abs(values))), 1.0)
    fig = Figure(figsize=(1.1 * grid.shape[1] + 3.2, 0.45 * grid.shape[0] + 2.0))
    ax = fig.add_subplot()
    image = ax.imshow(
        np.ma.masked_invalid(values), cmap="RdBu", norm=TwoSlopeNorm(0.0, -span, span), aspect="auto"
    )
    ax.set_xticks(range(grid.shape[1]), [str(int(k)) for k in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [str(int(s)) for s in grid.index])
    for (r, c), v in np.ndenumerate(values):
        dark = not np.isnan(v) and abs(v) > 0.6 * span  # white on the saturated ends of the scale
        ax.text(c, r, "–" if np.isnan(v) else f"{v:+.1f}", ha="center", va="center", fontsize=8,
                color="white" if dark else "black")  # fmt: skip
    ax.set_xlabel("top-k")
    ax.set_ylabel("speculative steps")
    hosts = part["host"].nunique()
    ax.set_title(title(key) + (f"\nmedian over {hosts} hosts" if hosts > 1 else ""), fontsize=9)
    fig.colorbar(image, ax=ax, label="speedup vs baseline (%)", fraction=0.08, pad=0.04)
    layout(fig, 0.75, 1.0, 0.75, 0.6)
    return Plot(name, "Speedup % by steps and top-k (best draft-token count in each cell)", png(fig))


def per_host(part: pd.DataFrame, speed: pd.DataFrame, key: tuple[object, ...], name: str) -> Plot | None:
    """Baseline and best config per host (the objective's medians) as a dot plot, the fleet median;
    slow hosts in red."""
    if part["host"].nunique() < 2:
        return None
    base = part[~part["speculative"].astype(bool) & part["env_profile"].eq("default")]
    base = base.drop_duplicates("host").set_index("host")["score"]
    top = part[part["best"].astype(bool)].drop_duplicates("host").set_index("host")
    hosts = natural(part["host"].unique())[::-1]  # the first host at the top
    y = np.arange(len(hosts))
    fig = Figure(figsize=(10, max(3.0, 0.22 * len(hosts) + 1.3)))
    ax = fig.add_subplot()
    best = top["score"].reindex(hosts).to_numpy(dtype=float)
    err = np.vstack([best - top["tps_ci_lo"].reindex(hosts), top["tps_ci_hi"].reindex(hosts) - best])
    # A dot plot, not bars: hosts differ by a few percent, which bars from zero would hide.
    ax.hlines(y, base.reindex(hosts), best, color="0.8", lw=1.5)
    ax.plot(base.reindex(hosts), y, "o", color="0.55", ms=5, label="baseline")
    ax.errorbar(
        best, y, xerr=np.nan_to_num(err), fmt="o", color="C0", ms=5, capsize=2, label="best config (95% CI)"
    )
    median = float(np.nanmedian(best))
    ax.axvline(median, ls="--", color="C1", label=f"fleet median of best {median:.1f}")
    slow = set(speed.loc[speed["slow"], "host"])
    ax.set_yticks(y, [f"{h} ({top['config'].get(h, '–')})" for h in hosts], fontsize=8)
    for tick, h in zip(ax.get_yticklabels(), hosts, strict=True):
        tick.set_color("C3" if h in slow else "black")
    ax.set_ylim(-0.7, len(hosts) - 0.3)
    ax.set_xlabel(f"median {part['objective'].iloc[0]}")
    ax.set_title(title(key) + "\nper host: baseline → best config (red: slow host)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    longest = max(len(t.get_text()) for t in ax.get_yticklabels())
    layout(fig, 0.25 + 0.062 * longest, legend_inches(ax), 0.7, 0.55)
    return Plot(name, "Per host: baseline and best config (config in parentheses)", png(fig))


Draw = Callable[..., Plot | None]
# Relative drawing cost (a 50-host sweep): the per-host plot has a labelled row per host.
COST: dict[Draw, int] = {
    per_host: 3,
    tokps_vs_steps: 2,
    speedup_heatmap: 2,
    accept_vs_steps: 1,
    loadplots.pareto: 2,
    loadplots.best_steps: 1,
}
Task = tuple[Draw, tuple[Any, ...]]
_TASKS: list[Task] = []  # what forked workers draw: they inherit it, no frame is pickled to them


def _draw(task: Task) -> Plot | None:
    """Run one plotting function."""
    function, args = task
    with rc_context(STYLE):
        return function(*args)


def _draw_inherited(index: int) -> Plot | None:
    """Draw task `index` of _TASKS, in a worker forked after they were set."""
    return _draw(_TASKS[index])


def _draw_all(tasks: list[Task]) -> list[Plot | None]:
    """Draw the tasks, over forked workers when there are several."""
    workers = min(len(tasks), os.cpu_count() or 1, 4)
    if workers < 2 or not forks.available():
        return [_draw(t) for t in tasks]
    # Drawing is CPU-bound Python: one figure per core. The costliest figures first, so that no
    # core is left with a long one at the end.
    _TASKS[:] = tasks
    order = sorted(range(len(tasks)), key=lambda i: -COST[tasks[i][0]])
    try:
        with ProcessPoolExecutor(workers, mp_context=forks.context()) as pool:
            with forks.frozen_gc():  # the workers are forked at the first submit
                futures = {i: pool.submit(_draw_inherited, i) for i in order}
            return [futures[i].result() for i in range(len(tasks))]
    finally:
        _TASKS.clear()


def _code_digest() -> bytes:
    """Digest of what decides a plot's pixels besides its rows: this code and matplotlib's."""
    digest = hashlib.sha256(matplotlib.__version__.encode() + repr(STYLE).encode())
    for name in ("plots.py", "figures.py", "plotfile.py", "loadplots.py", "recommend.py", "sla.py"):
        digest.update((Path(__file__).parent / name).read_bytes())
    return digest.digest()


def _keys(code: bytes, family: list[Task], *frames: pd.DataFrame) -> list[str | None]:
    """The cache key of each plot of a family (its rows hashed once for all of them)."""
    try:
        rows = cache.content_digest(*frames)
    except TypeError:  # a column of values pandas cannot hash: these plots are drawn every time
        return [None] * len(family)
    return [hashlib.sha256(code + rows + function.__name__.encode()).hexdigest() for function, _ in family]


def make_plots(
    step: pd.DataFrame, speed: pd.DataFrame, cache_dir: Path | None = None
) -> tuple[list[Plot], int]:
    """Every plot of the first MAX_FAMILIES families, and how many families were left out.

    `cache_dir`: reuse plots drawn before from the same rows (analysis.cache), and keep new ones.
    """
    tasks: list[Task] = []
    keys: list[str | None] = []
    code = _code_digest() if cache_dir is not None else b""
    families = list(step.groupby(FAMILY, dropna=False, sort=False))
    for key, part in families[:MAX_FAMILIES]:
        stem = slug(key)
        family_speed = speed.merge(pd.DataFrame([key], columns=FAMILY), on=FAMILY)
        family: list[Task] = [
            (tokps_vs_steps, (part, key, f"{stem}_tokps_vs_steps.png")),
            (accept_vs_steps, (part, key, f"{stem}_accept_vs_steps.png")),
            (speedup_heatmap, (part, key, f"{stem}_speedup_heatmap.png")),
            (per_host, (part, family_speed, key, f"{stem}_per_host.png")),
        ]
        tasks += family
        if cache_dir is None:
            keys += [None] * len(family)
        else:
            keys += _keys(code + repr(key).encode(), family, part, family_speed)
    # Across concurrency, per host group: the Pareto front and the best step count (loadplots).
    for key, part, family in loadplots.families(step, MAX_FAMILIES):
        tasks += family
        keys += [None] * len(family) if cache_dir is None else _keys(code + repr(key).encode(), family, part)
    made: dict[int, Plot | None] = {}
    for i, k in enumerate(keys):
        found, plot = cache.read_plot(cache_dir, k) if k else (False, None)
        if found:
            made[i] = plot
    todo = [i for i in range(len(tasks)) if i not in made]
    for i, plot in zip(todo, _draw_all([tasks[i] for i in todo]), strict=True):
        made[i] = plot
        if keys[i]:
            cache.write_plot(cache_dir, keys[i], plot)
    plots = [made[i] for i in range(len(tasks))]
    return [p for p in plots if p is not None], max(0, len(families) - MAX_FAMILIES)
