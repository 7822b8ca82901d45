"""The deployment views as display blocks: SLA and goodput, adaptive against static, the
recommendation per load level. The report shows the first two; `recommend` prints the last."""

from __future__ import annotations

import pandas as pd

from analysis import objectives
from analysis.report.recommend import HOST_GROUP
from analysis.report.render import MISSING, Block, num
from analysis.report.sla import Sla


def group_title(key: tuple[object, ...]) -> str:
    """One line naming a host group: sweep, host, engine and model, and the workload where named."""
    sweep, host, engine, model, workload = (MISSING if pd.isna(k) else k for k in key)
    return f"sweep {sweep} | host {host} | {engine} {model}" + (
        f" | workload {workload}" if workload != MISSING else ""
    )


def _flag(values: pd.Series, yes: str = "yes", no: str = "no") -> list[str]:
    """True / false / missing as words."""
    return [MISSING if pd.isna(v) else yes if v else no for v in values.astype("boolean").tolist()]


def _ci(pct: pd.Series, lo: pd.Series, hi: pd.Series) -> list[str]:
    """`+5.9% [+3.1, +8.8]`; `(no CI)` without an interval; a dash without a number."""
    rows = zip(num(pct, "+.1f"), num(lo, "+.1f"), num(hi, "+.1f"), strict=True)
    return [
        MISSING if p == MISSING else f"{p}% " + (f"[{a}, {b}]" if a != MISSING else "(no CI)")
        for p, a, b in rows
    ]


def _pair(a: pd.Series, b: pd.Series, fmt: str) -> list[str]:
    """Two numbers as `a/b` (p50/p99)."""
    return [f"{x}/{y}" for x, y in zip(num(a, fmt), num(b, fmt), strict=True)]


def host_blocks(
    frame: pd.DataFrame, columns: dict[str, tuple[bool, list[str]]], title: str, note: str
) -> list[Block]:
    """One block per host group of `frame` (already in display order), columns made over all rows."""
    out = []
    for key, part in frame.reset_index(drop=True).groupby(HOST_GROUP, dropna=False, sort=False):
        rows = part.index.to_numpy()
        headers = list(columns)
        cols = [[values[i] for i in rows] for _, values in columns.values()]
        right = [r for r, _ in columns.values()]
        out.append(Block(f"{title} | {group_title(key)}", headers, cols, right, note))
    return out


def sla_blocks(step: pd.DataFrame, sla: Sla) -> list[Block]:
    """Per host group: every config at every level with its latencies, goodput and SLA verdict."""
    t = step[step["concurrency"].notna()]  # the step table's order: host group, level, config
    columns = {
        "concurrency": (True, [str(c) for c in t["concurrency"].tolist()]),
        "config": (False, t["config"].astype(str).tolist()),
        "tok/s": (True, num(t["decode_tps"], ".1f")),
        "TTFT p50/p99 ms": (True, _pair(t["ttft_p50_ms"], t["ttft_p99_ms"], ".0f")),
        "TPOT p50/p99 ms": (True, _pair(t["tpot_p50_ms"], t["tpot_p99_ms"], ".1f")),
        "goodput req/s": (True, num(t["goodput_rps"], ".2f")),
        "SLO met": (True, [v if v == MISSING else f"{v}%" for v in num(t["slo_attainment"] * 100.0, ".0f")]),
        "total tok/s": (True, num(t["total_tps"], ".1f")),
        "per-user tok/s": (True, num(t["user_tps"], ".1f")),
        "meets SLA": (False, _flag(t["meets_sla"])),
    }
    note = (
        f"SLA: {sla.describe()}; goodput: requests per second that succeeded with TTFT and TPOT within "
        "the SLOs (SGLang's definition); meets SLA: the config's p99 TTFT and p99 TPOT within them"
    )
    return host_blocks(t, columns, "SLA and goodput", note)


def adaptive_blocks(adaptive: pd.DataFrame) -> list[Block]:
    """Per host group: the adaptive arm against the best static config at each level."""
    if adaptive.empty:
        return []
    t = adaptive
    columns = {
        "concurrency": (True, [str(c) for c in t["concurrency"].tolist()]),
        "adaptive": (False, t["adaptive_config"].astype(str).tolist()),
        "tok/s": (True, num(t["adaptive_tps"], ".1f")),
        "best static": (False, [s if isinstance(s, str) else MISSING for s in t["best_static"]]),
        "static tok/s": (True, num(t["static_tps"], ".1f")),
        "adaptive vs static [95% CI]": (False, _ci(t["diff_pct"], t["ci_lo"], t["ci_hi"])),
        "at least as fast": (False, _flag(t["at_least_as_fast"])),
    }
    note = "at least as fast: the 95% CI of adaptive / best static reaches 0% or above (not clearly slower)"
    return host_blocks(t, columns, "adaptive vs best static", note)


def verdict_words(t: pd.DataFrame) -> list[str]:
    """`better (3 launches)`, `within_noise (1 launch, within-launch CI)`; a dash for the baseline."""
    rows = zip(t["verdict"].tolist(), t["launches"].tolist(), t["ci_basis"].tolist(), strict=True)
    out = []
    for word, n, basis in rows:
        if not isinstance(word, str):
            out.append(MISSING)
            continue
        one = " launch" if n == 1 else " launches"
        out.append(f"{word} ({n}{one}{', within-launch CI' if basis == 'within_launch' else ''})")
    return out


def recommend_blocks(rec: pd.DataFrame, adaptive: pd.DataFrame, sla: Sla) -> list[Block]:
    """Per host group: the config to deploy at each level, with why, named by the objective ranked on."""
    t = rec
    objective = objectives.get(t["objective"].dropna().iloc[0] if t["objective"].notna().any() else None)
    arm = adaptive.drop_duplicates(["sweep_id", "host", "engine", "model", "concurrency"])
    arm = t[[*HOST_GROUP, "concurrency"]].merge(arm, on=[*HOST_GROUP, "concurrency"], how="left")
    columns = {
        "concurrency": (True, [str(c) for c in t["concurrency"].tolist()]),
        "config": (False, [c if isinstance(c, str) else "none" for c in t["config"]]),
        f"{objective.name} {objective.unit}": (True, num(t["score"], ".1f")),
        "tok/s": (True, num(t["decode_tps"], ".1f")),
        "speedup [95% CI]": (False, _ci(t["speedup_pct"], t["speedup_ci_lo"], t["speedup_ci_hi"])),
        "within noise": (False, [", ".join(w) or MISSING for w in t["within_noise"]]),
        "meets SLA": (False, _flag(t["meets_sla"])),
        "goodput req/s": (True, num(t["goodput_rps"], ".2f")),
        "adaptive vs best static": (False, [v if isinstance(v, str) else MISSING for v in arm["verdict"]]),
        "verdict": (False, verdict_words(t)),
        "why": (False, t["reason"].tolist()),
    }
    note = (
        f"ranked on {objective.label()}: objective={objective.name}; SLA: {sla.describe()}; tok/s: median "
        "decode tok/s per request; speedup and verdict: the objective's, against the baseline, with the "
        "launches it rests on (1: one run of each, not repeated)"
    )
    return host_blocks(t, columns, f"recommended on {objective.name}", note)
