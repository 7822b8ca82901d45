"""What to deploy at each load level, SGLang's adaptive schedule, and adaptive against static.

All three read the step table (with analysis.report.sla's columns), so the numbers they quote are
the report's cells. A recommendation is per host group = (sweep, host, engine, model), the step
table's group without the concurrency: every interval the table holds is between repeats of one
host in one sweep (same baseline, prompts and server build). Pooling hosts would fold their real
speed differences (the cross-host view) into the noise; hosts that agree give the same answer each,
and one that disagrees is worth seeing. The adaptive schedule is the exception: one file per
model, the union of the groups' candidate steps per level (see `adaptive_schedule`).

At each level, among the configs with no failure that meet the SLA, the recommendation goes by the
step table's verdict against the baseline: the fastest (the highest median of the objective the
table ranks on, its `score`: analysis.objectives) of those whose verdict is `better`; the
baseline where none is (within noise, or no interval to say: a point estimate alone never names
speculation). Only where the baseline itself is not eligible does the fastest config stand without a
verdict. Configs within noise of the one chosen (the same interval, against it) are named as such.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from analysis.engines import sglang, sglang_adaptive, vllm, vllm_spec
from analysis.report.compare import GROUP, PRIOR_COLUMNS, is_baseline, verdict_ci
from analysis.stats import straddles_zero
from analysis.sweep.config import parse_id

HOST_GROUP = GROUP[:-1]  # sweep, host, engine, model, workload
LEVEL = GROUP  # one load level of one host group and workload
_STRINGS = ["sweep_id", "host", "engine", "model", "config"]


def is_adaptive(step: pd.DataFrame) -> pd.Series:
    """Rows of SGLang's adaptive arm (the config's `adaptive` field; its id where the column is absent)."""
    if "adaptive" in step.columns:
        return step["adaptive"].astype("boolean").fillna(False).astype(bool)
    return step["config"].map(_adaptive_id).astype(bool)


def _adaptive_id(config: object) -> bool:
    """Whether a config id names the adaptive arm; ids that are not specsweep's are not."""
    try:
        return bool(parse_id(str(config))["adaptive"])
    except ValueError:
        return False


def eligible(step: pd.DataFrame) -> pd.Series:
    """Rows that may be recommended: no failure, a median, and not missing the SLA."""
    meets = step["meets_sla"] if "meets_sla" in step.columns else pd.Series(pd.NA, index=step.index)
    fine = meets.astype("boolean").fillna(True).astype(bool)
    return step["failures"].eq(0) & step["score"].notna() & fine


def step_count(step: pd.DataFrame) -> pd.Series:
    """Speculative steps per row: 0 without speculation, NaN for the adaptive arm."""
    steps = step["steps"].astype("Float64").where(step["speculative"].astype(bool), 0.0)
    return steps.where(~is_adaptive(step)).astype("float64")


def _levels(step: pd.DataFrame) -> pd.DataFrame:
    """The measured rows with plain key columns, positional index, and the flags used below."""
    t = step[step["concurrency"].notna()].reset_index(drop=True)
    t = t.astype({c: "object" for c in _STRINGS if c in t.columns})
    return t.assign(_ok=eligible(t), _adaptive=is_adaptive(t), _base=is_baseline(t), _steps=step_count(t))


def _fastest(t: pd.DataFrame, mask: pd.Series) -> pd.Series:
    """Per level, the first row of `mask` by the objective's median (ties: the table's order, baseline
    first)."""
    ranked = t[mask].sort_values("score", ascending=False, kind="stable")
    return t.index.isin(ranked.drop_duplicates(LEVEL).index)


def _against(t: pd.DataFrame, ref: np.ndarray) -> tuple[pd.Series, pd.Series, pd.Series]:
    """Each row's % difference from its level's `ref` row and the 95% interval on the verdict's
    basis (the table's rule, analysis.report.compare.verdict_ci); NaN without a ref."""
    stats = ["score", "se2", "se_df", "ci_basis"]
    r = t.loc[ref, [*LEVEL, *stats]].rename(columns={c: f"r_{c}" for c in stats})
    m = t[LEVEL].merge(r, on=LEVEL, how="left")
    own = ["se2", "se_df", "ci_basis", *(c for c in PRIOR_COLUMNS if c in t)]  # the host's launch spread
    both = pd.concat([t[own], m[[f"r_{c}" for c in stats]]], axis=1)
    ratio = t["score"] / m["r_score"]
    return (ratio - 1.0) * 100.0, *verdict_ci(both, ratio, "r_")


def _per_level(t: pd.DataFrame, mask: pd.Series | np.ndarray) -> pd.Series:
    """Per row: whether any row of its level is in `mask`."""
    return t.assign(_m=mask).groupby(LEVEL, dropna=False, sort=False)["_m"].transform("any").astype(bool)


def recommend(step: pd.DataFrame) -> pd.DataFrame:
    """One row per (host group, concurrency): the config to deploy and why (see the module doc)."""
    t = _levels(step)
    fastest = _fastest(t, t["_ok"])
    base = t["_ok"] & t["_base"]
    better = t["_ok"] & t["verdict"].eq("better")
    # Speculation is named only on the table's verdict: the fastest config `better` than the
    # baseline, else the baseline; a level with no eligible baseline keeps its fastest config.
    on_verdict = _fastest(t, better) | (base & ~_per_level(t, better))
    chosen = np.where(_per_level(t, base), on_verdict, fastest)
    back = _per_level(t, chosen & base)
    _, lo, hi = _against(t, chosen)
    near = t["_ok"] & ~chosen & straddles_zero(lo, hi).fillna(False).astype(bool)
    within = t[near].groupby(LEVEL, dropna=False, sort=False)["config"].agg(list).rename("within_noise")
    within = within.reset_index()
    # The fastest by median, passed over for the baseline: its verdict's interval says why.
    passed = t.loc[
        fastest & ~chosen & back, [*LEVEL, "config", "speedup_pct", "verdict_ci_lo", "verdict_ci_hi"]
    ]
    passed = passed.rename(columns={c: f"fastest_{c}" for c in passed.columns if c not in LEVEL})
    done = t.assign(_done=t["failures"].eq(0) & t["score"].notna())
    counts = done.groupby(LEVEL, dropna=False, sort=False).agg(
        n_eligible=("_ok", "sum"), n_done=("_done", "sum")
    )
    counts = counts.reset_index()
    # A level some config did not hold is not reported as met (the step table marks the rows).
    reached = t.groupby(LEVEL, dropna=False, sort=False).agg(
        level_reached=("level_reached", _all_known), queued=("queued", _any_known)
    )
    reached = reached.reset_index()
    out = t[LEVEL].drop_duplicates().merge(t.loc[chosen, [*LEVEL, *_PICKED]], on=LEVEL, how="left")
    for part in (within, passed, counts, reached, _queued_text(t)):
        out = out.merge(part, on=LEVEL, how="left")
    out = out.merge(_verdicts(t), on=LEVEL, how="left")
    out["within_noise"] = [w if isinstance(w, list) else [] for w in out["within_noise"]]
    out["reason"] = [_reason(r) for r in out.to_dict("records")]
    return out.reset_index(drop=True)


_PICKED = [
    "config", "objective", "score", "decode_tps", "speedup_pct", "speedup_ci_lo", "speedup_ci_hi",
    "meets_sla", "goodput_rps", "total_tps", "user_tps", "ttft_p99_ms", "tpot_p99_ms", "verdict",
    "launches", "ci_basis", "achieved_concurrency", "server_running",
]  # fmt: skip
VERDICT_KEYS = ["verdict", "speedup_pct", "speedup_ci_lo", "speedup_ci_hi", "launches", "ci_basis"]


def _verdicts(t: pd.DataFrame) -> pd.DataFrame:
    """Per level: every measured config's verdict against the baseline (the table's), as records."""
    rows = t[t["score"].notna()]
    made = rows.groupby(LEVEL, dropna=False, sort=False)[["config", *VERDICT_KEYS]].apply(
        lambda p: p.to_dict("records")
    )
    return made.rename("configs").reset_index()


def _all_known(flags: pd.Series) -> object:
    """Whether every row that knows it reached its level; <NA> when none knows."""
    known = flags.dropna()
    return pd.NA if known.empty else bool(known.all())


def _queued_text(t: pd.DataFrame) -> pd.DataFrame:
    """Per level, the configs whose server queued part of it, as `s2 (16.0 on average)`."""
    q = t[t["queued"].fillna(False).astype(bool)]
    said = q["config"].astype(str) + " (" + q["server_queued"].map("{:.1f}".format) + " on average)"
    by = said.groupby([q[k] for k in LEVEL], dropna=False, sort=False).agg(", ".join)
    return by.rename("queued_text").reset_index()


def _any_known(flags: pd.Series) -> object:
    """Whether some row that knows it says so; <NA> when none knows."""
    known = flags.dropna()
    return pd.NA if known.empty else bool(known.any())


def _pct(value: float) -> str:
    """A signed percentage with one decimal."""
    return f"{value:+.1f}"


def _speedup_text(pct: float, lo: float, hi: float) -> str:
    """`+5.9% [+3.1, +8.8]`, or without the interval where there is none."""
    ci = f" [{_pct(lo)}, {_pct(hi)}]" if pd.notna(lo) else " (no CI)"
    return f"{_pct(pct)}%{ci}"


def _reason(r: dict[str, Any]) -> str:
    """Why this config, in one sentence, and whether the level was held."""
    why = _why(r)
    reached = r.get("level_reached")
    if reached is not None and not pd.isna(reached) and not reached:
        # The server's running count where it gave one (as the table's in flight), else the client's.
        held = r.get("server_running")
        held = held if isinstance(held, float) and held == held else r.get("achieved_concurrency")
        held = f"{held:.1f}" if isinstance(held, float) and held == held else "fewer"
        why += f"; level not reached: {held} of {r['concurrency']:g} in flight on average"
    if isinstance(r.get("queued_text"), str):
        why += f"; the server queued requests of {r['queued_text']}"
    return why


def _why(r: dict[str, Any]) -> str:
    """Why this config, in one sentence."""
    if not isinstance(r["config"], str):
        if r["n_done"]:
            return f"none of the {r['n_done']} configs that completed meets the SLA"
        return "no config completed every repeat"
    if isinstance(r.get("fastest_config"), str):
        gain = _speedup_text(r["fastest_speedup_pct"], r["fastest_verdict_ci_lo"], r["fastest_verdict_ci_hi"])
        if pd.isna(r["fastest_verdict_ci_lo"]):
            return (
                f"speculation not shown to pay: the fastest, {r['fastest_config']} ({gain}), has no verdict"
            )
        return f"speculation does not pay: the fastest, {r['fastest_config']} ({gain}), is within noise of it"
    if pd.isna(r["speedup_pct"]):
        return "fastest; no baseline to compare with"
    if r["speedup_pct"] == 0 and pd.isna(r["speedup_ci_lo"]):
        return "fastest: no speculative config is faster"
    return f"fastest; {_speedup_text(r['speedup_pct'], r['speedup_ci_lo'], r['speedup_ci_hi'])} over baseline"


def adaptive_table(step: pd.DataFrame) -> pd.DataFrame:
    """Per level with an adaptive arm: it against the best static config (any other, baseline too)."""
    if not is_adaptive(step).any():  # the common case: no arm, nothing to compare (and no cost)
        return pd.DataFrame(columns=ADAPTIVE_COLUMNS)
    t = _levels(step)
    static = _fastest(t, t["_ok"] & ~t["_adaptive"])
    diff, lo, hi = _against(t, static)
    t = t.assign(diff_pct=diff, ci_lo=lo, ci_hi=hi)
    best = t.loc[static, [*LEVEL, "config", "score"]].rename(
        columns={"config": "best_static", "score": "static_tps"}
    )
    arms = t[t["_adaptive"]].rename(columns={"config": "adaptive_config", "score": "adaptive_tps"})
    out = arms[[*LEVEL, "adaptive_config", "adaptive_tps", "diff_pct", "ci_lo", "ci_hi", "_ok"]].merge(
        best, on=LEVEL, how="left"
    )
    # At least as fast: not clearly slower (the interval of adaptive / static reaches 0 or above).
    by_ci = out["ci_hi"].ge(0).where(out["ci_hi"].notna())
    by_median = out["diff_pct"].ge(0).where(out["diff_pct"].notna())
    known = by_ci.fillna(by_median).astype("boolean")
    out["at_least_as_fast"] = known.where(out["_ok"], False)
    out["verdict"] = [_verdict(r) for r in out.to_dict("records")]
    return out[ADAPTIVE_COLUMNS].reset_index(drop=True)


ADAPTIVE_COLUMNS = [
    *LEVEL, "adaptive_config", "adaptive_tps", "best_static", "static_tps", "diff_pct", "ci_lo", "ci_hi",
    "at_least_as_fast", "verdict",
]  # fmt: skip


def _verdict(r: dict[str, Any]) -> str:
    """Adaptive against the best static config, in words."""
    if not r["_ok"]:
        return "adaptive failed or misses the SLA"
    if not isinstance(r["best_static"], str):
        return "no static config to compare with"
    if pd.isna(r["ci_lo"]):
        word = "as fast or faster" if r["diff_pct"] >= 0 else "slower"
        return f"{word} than {r['best_static']} by median ({_pct(r['diff_pct'])}%, no CI)"
    gap = _speedup_text(r["diff_pct"], r["ci_lo"], r["ci_hi"])
    if r["ci_lo"] > 0:
        return f"faster than {r['best_static']}: {gap}"
    if r["ci_hi"] < 0:
        return f"slower than {r['best_static']}: {gap}"
    return f"as fast as {r['best_static']} (within noise): {gap}"


def step_choices(step: pd.DataFrame, adaptive_ready: bool = False) -> pd.DataFrame:
    """Per level: the best step count (0 = baseline) and those within noise of it, sorted.

    Static configs only; adaptive_ready keeps those SGLang's adaptive mode can switch between
    (top-k 1, or unset: adaptive_unsupported_reason refuses any other).
    """
    t = _levels(step)
    keep = t["_ok"] & ~t["_adaptive"]
    if adaptive_ready:
        keep &= t["topk"].isna() | t["topk"].eq(1)
    best = _fastest(t, keep)
    _, lo, hi = _against(t, best)
    near = keep & (best | straddles_zero(lo, hi).fillna(False).astype(bool))
    out = (
        t[near]
        .groupby(LEVEL, dropna=False, sort=False)
        .agg(candidates=("_steps", lambda s: sorted({int(x) for x in s})))
        .reset_index()
    )
    chosen = t.loc[best, [*LEVEL, "_steps", "config"]].rename(columns={"_steps": "best_steps"})
    out = out.merge(chosen.astype({"best_steps": "int64"}), on=LEVEL, how="left")
    out["steps_lo"] = [min(c) for c in out["candidates"]]
    out["steps_hi"] = [max(c) for c in out["candidates"]]
    return out


class ScheduleError(ValueError):
    """The measurements make no adaptive schedule (nothing eligible, or several models)."""


def adaptive_schedule(step: pd.DataFrame) -> tuple[dict[str, dict[str, list[int]]], list[str]]:
    """SGLang's --speculative-adaptive-config from the measurements, and warnings.

    Keys: the measured concurrency levels (SGLang routes a batch to the largest key at or below
    it); candidate_steps: the best step count and those within noise of it, 0 for the baseline. One
    file serves one model: over several hosts or sweeps, a level's steps are the union of theirs.
    """
    t = _one_model(step, "an adaptive config")
    warnings = []
    engines = set(t["engine"])
    algorithms = {str(a).upper() for a in t.loc[t["speculative"].astype(bool), "algorithm"].dropna()}
    # The file is SGLang's schedule (--speculative-adaptive-config).
    if engines != {sglang.NAME} or not algorithms <= set(sglang_adaptive.ALGORITHMS):
        only = "/".join(sglang_adaptive.ALGORITHMS)
        warnings.append(
            f"SGLang runs adaptive speculation for {only} only; these results "
            f"are {', '.join(sorted(engines))} {', '.join(sorted(algorithms)) or ''}".rstrip()
        )
    choices = step_choices(step, adaptive_ready=True)
    warnings += _left_out(t, choices["concurrency"])
    union = choices.groupby("concurrency")["candidates"].agg(lambda s: sorted(set().union(*s)))
    return {str(int(c)): {"candidate_steps": steps} for c, steps in union.items()}, warnings


def dynamic_schedule(step: pd.DataFrame) -> tuple[dict[str, Any], list[str]]:
    """vLLM's Dynamic SD part of --speculative-config from the recommendation, and warnings.

    Per level, the step count of the config `recommend` names (0 where the baseline is the answer),
    as num_speculative_tokens_per_batch_size (analysis.engines.vllm_spec.dynamic_config). vLLM takes
    one step count per batch size: where host groups answer a level differently, the fewest steps
    (speculation shown to pay in every group). One schedule runs one speculative method.
    """
    t = _one_model(step, "a Dynamic SD schedule")
    warnings = []
    engines = set(t["engine"])
    if engines != {vllm.NAME}:
        warnings.append(f"vLLM's Dynamic SD schedule, from {', '.join(sorted(engines))} results")
    rows = t[[*LEVEL, "config", "_steps", "algorithm"]]
    chosen = recommend(step)[[*LEVEL, "config"]].merge(rows, on=[*LEVEL, "config"]).dropna(subset="_steps")
    speculating = chosen[chosen["_steps"] > 0]
    methods = sorted({str(m) for m in speculating["algorithm"].dropna()})
    if len(methods) > 1:
        picked = "; ".join(f"{m} at {', '.join(str(int(c)) for c in sorted(set(p['concurrency'])))}"
                           for m, p in speculating.groupby("algorithm"))  # fmt: skip
        raise ScheduleError(f"a Dynamic SD schedule runs one speculative method; the answer picks {picked}")
    steps = chosen.groupby("concurrency")["_steps"].agg(["min", "max"])
    split = steps.index[steps["min"] != steps["max"]]
    if len(split):
        levels = ", ".join(str(int(c)) for c in split)
        warnings.append(f"host groups answer concurrency {levels} differently: the fewest steps taken")
    warnings += _left_out(t, chosen["concurrency"])
    warnings += vllm_spec.dynamic_notes(methods[0] if methods else None)
    try:
        schedule = vllm_spec.dynamic_config({int(c): int(k) for c, k in steps["min"].items()})
    except vllm_spec.SpecConfigError as exc:
        raise ScheduleError(str(exc)) from exc
    return schedule, warnings


def _one_model(step: pd.DataFrame, schedule: str) -> pd.DataFrame:
    """The measured rows (as _levels), refused when they hold several models: a schedule serves one."""
    t = _levels(step)
    models = t[["engine", "model"]].drop_duplicates()
    if len(models) > 1:
        names = ", ".join(f"{e} {m}" for e, m in models.itertuples(index=False))
        raise ScheduleError(f"{schedule} serves one model; these results hold {names}")
    return t


def _left_out(t: pd.DataFrame, answered: pd.Series) -> list[str]:
    """A warning naming the measured levels with no answer; ScheduleError when none has one."""
    if answered.empty:
        raise ScheduleError("no concurrency level has a config that completed and met the SLA")
    missing = sorted(set(t["concurrency"].astype(int)) - set(answered.astype(int)))
    return [f"no eligible config at concurrency {', '.join(map(str, missing))}: left out"] if missing else []
