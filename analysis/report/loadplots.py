"""Plots across concurrency levels, one pair per host group measured at two levels or more: the
Pareto front (per-user tok/s against total tok/s, as vLLM's `bench sweep plot_pareto` draws it) and
the best step count against concurrency. Drawn with the report's other plots (plots.make_plots).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, MaxNLocator, NullLocator

from analysis.report.figures import layout, legend_inches, png
from analysis.report.plotfile import Plot
from analysis.report.recommend import HOST_GROUP, recommend, step_choices

MAX_LINES = 8  # labelled config lines per Pareto plot; the rest are drawn thin and grey


def _title(key: tuple[object, ...]) -> str:
    """A host group (and its workload, where named) as a figure title."""
    sweep, host, engine, model, workload = key
    load = "" if pd.isna(workload) else f" · {workload}"
    return f"{sweep} · {host} · {engine} {str(model).rstrip('/').rsplit('/', 1)[-1]}{load}"


def _slug(key: tuple[object, ...]) -> str:
    """A file-name-safe name for a host group (and its workload)."""
    sweep, host, engine, model, workload = key
    load = "" if pd.isna(workload) else f"_{workload}"
    text = f"{sweep}_{host}_{engine}_{str(model).rstrip('/').rsplit('/', 1)[-1]}{load}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text)


def front(points: pd.DataFrame) -> pd.DataFrame:
    """The Pareto-optimal points (no other point has both more total and more per-user tok/s)."""
    ranked = points.sort_values(["total_tps", "user_tps"], ascending=False)
    best_user = ranked["user_tps"].cummax().shift(fill_value=-np.inf)
    return ranked[ranked["user_tps"] > best_user].sort_values("total_tps")


def _shown(t: pd.DataFrame, picked: pd.DataFrame) -> list[str]:
    """Configs that get a labelled line: the baseline, the recommended, then the fastest by median."""
    base = t.loc[~t["speculative"].astype(bool) & t["env_profile"].eq("default"), "config"]
    order = t.groupby("config", sort=False)["decode_tps"].median().sort_values(ascending=False).index
    wanted = list(dict.fromkeys([*base, *picked["config"].dropna(), *order]))
    return wanted[:MAX_LINES]


def pareto(part: pd.DataFrame, key: tuple[object, ...], name: str) -> Plot | None:
    """Per-user tok/s against total tok/s, a line per config through its concurrency levels."""
    t = part[part["concurrency"].notna() & part["total_tps"].notna() & part["failures"].eq(0)]
    if t["concurrency"].nunique() < 2:
        return None
    rec = recommend(part)
    picked = rec.merge(t, on=[*HOST_GROUP, "concurrency", "config"], suffixes=("_r", ""))
    shown = _shown(t, picked)
    fig = Figure(figsize=(8.5, 5))
    ax = fig.add_subplot()
    edge = front(t)
    ax.plot(
        edge["total_tps"], edge["user_tps"], color="0.75", lw=6, alpha=0.5, zorder=0, label="Pareto front"
    )
    styles = iter(f"C{i}" for i in range(10))
    for config, pts in t.sort_values("concurrency").groupby("config", sort=False):
        x, y = pts["total_tps"].to_numpy(float), pts["user_tps"].to_numpy(float)
        if config not in shown:
            ax.plot(x, y, color="0.7", lw=0.8, marker=".", zorder=1)
        elif config == shown[0] and not pts["speculative"].astype(bool).any():
            ax.plot(x, y, color="black", ls="--", lw=2, marker="s", label=f"{config} (no speculation)")
        else:
            ax.plot(x, y, color=next(styles, "0.4"), marker="o", lw=1.5, label=str(config))
    ax.scatter(
        picked["total_tps"], picked["user_tps"], s=260, facecolors="none", edgecolors="C3", linewidths=2,
        zorder=5, label="recommended per level",
    )  # fmt: skip
    for r in picked.itertuples():
        ax.annotate(f"c{r.concurrency}: {r.config}", (r.total_tps, r.user_tps), xytext=(8, 8),
                    textcoords="offset points", fontsize=8, color="C3")  # fmt: skip
    ax.set_xlabel("total tok/s (all requests' output tokens / run duration)")
    ax.set_ylabel("per-user tok/s (a request's tokens / its e2e, median)")
    ax.set_title(_title(key) + "\nPareto front across concurrency", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    layout(fig, 0.8, legend_inches(ax), 0.6, 0.55)
    caption = "Per-user vs total tok/s per config across concurrency (circled: recommended per level)"
    return Plot(name, caption, png(fig))


def best_steps(part: pd.DataFrame, key: tuple[object, ...], name: str) -> Plot | None:
    """The best static step count at each level, bars over the step counts within noise of it."""
    choices = step_choices(part).sort_values("concurrency")
    if len(choices) < 2:
        return None
    x = choices["concurrency"].to_numpy(float)
    y = choices["best_steps"].to_numpy(float)
    err = np.vstack([y - choices["steps_lo"].to_numpy(float), choices["steps_hi"].to_numpy(float) - y])
    fig = Figure(figsize=(7, 4.2))
    ax = fig.add_subplot()
    ax.errorbar(x, y, yerr=err, fmt="o-", capsize=5, color="C0", label="best (bars: within noise, 95% CI)")
    for cx, cy, config in zip(x, y, choices["config"], strict=True):
        ax.annotate(str(config), (cx, cy), xytext=(6, 6), textcoords="offset points", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(x))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(int(c)) for c in x])
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(-0.5, max(float(np.nanmax(choices["steps_hi"])), 1.0) + 0.8)
    ax.set_xlabel("concurrency")
    ax.set_ylabel("speculative steps (0 = baseline)")
    missing = sorted(set(part["concurrency"].dropna().astype(int)) - set(choices["concurrency"].astype(int)))
    note = (
        f"\n(no config completed and met the SLA at concurrency {', '.join(map(str, missing))})"
        if missing
        else ""
    )
    ax.set_title(_title(key) + "\nbest step count vs concurrency" + note, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    layout(fig, 0.7, legend_inches(ax), 0.75 if missing else 0.6, 0.55)
    return Plot(name, "Best step count vs concurrency (bars: step counts within noise of it)", png(fig))


Family = tuple[tuple[object, ...], pd.DataFrame, list[tuple[object, tuple[object, ...]]]]


def families(step: pd.DataFrame, limit: int) -> list[Family]:
    """(host group, its rows, its (draw function, arguments)) for the first `limit` host groups
    measured at several concurrency levels."""
    measured = step[step["concurrency"].notna()]
    several = measured.groupby(HOST_GROUP, dropna=False, sort=False)["concurrency"].transform("nunique") > 1
    out: list[Family] = []
    for key, part in list(measured[several].groupby(HOST_GROUP, dropna=False, sort=False))[:limit]:
        stem = _slug(key)
        draws = [
            (pareto, (part, key, f"{stem}_pareto.png")),
            (best_steps, (part, key, f"{stem}_best_steps.png")),
        ]
        out.append((key, part, draws))
    return out
