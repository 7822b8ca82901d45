"""The answer for a traffic mix: workloads weighed as the operator's traffic weighs them (by requests).

`--mix chat=0.7,code=0.3` says 70% of requests are chat. Each config's rate over the mix (the
objective's, `score`, and decode tok/s) is the request-weighted harmonic mean of its per-workload
rates (time per token adds up over requests; exact when the requests generate the same number of
tokens, as with the fixed output length), and its log variance follows by the delta method from the
workloads' own. The result is a step table with workload "mix" (one row per host group, level and
config), so the recommendation, the within-noise sets and SGLang's adaptive schedule are made from
it as from any other table.
`rates` is that mean on its own: the step search (analysis.search.objective) judges a probe by it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.report.compare import HOST_KEYS, is_baseline, verdict_ci
from analysis.stats import log_ratio_ci, median_ci, straddles_zero, verdict
from analysis.sweep.mix import MixError, parse

NAME = "mix"  # the mix's workload in the table it makes
KEYS = [*HOST_KEYS, "concurrency", "config"]


def recorded(paths: Iterable[Path]) -> dict[str, float] | None:
    """The mix the sweeps' requests named (`-e mix`, in <sweep>/sweep.json's settings); None where
    none did; MixError when two name different mixes."""
    named = []
    for sweep in (p / "sweep.json" for p in paths if p.is_dir()):
        try:
            shares = (json.loads(sweep.read_bytes()).get("settings") or {}).get("mix")
        except (OSError, ValueError):
            continue  # an older or hand-made folder: it names no mix
        if shares:
            named.append((sweep.parent.name, shares))
    if len({json.dumps(s, sort_keys=True) for _, s in named}) > 1:
        which = "; ".join(f"{name}: {shares}" for name, shares in named)
        raise MixError(f"--mix: the sweeps name different mixes ({which}); give one")
    return dict(named[0][1]) if named else None


def even(step: pd.DataFrame) -> dict[str, float]:
    """Equal shares of every named workload measured (the default mix)."""
    names = sorted(step["workload"].dropna().astype(str).unique())
    return {n: 1.0 / len(names) for n in names}


def _time_per_token(workload: pd.Series, rate: pd.Series, shares: Mapping[str, float]) -> pd.Series:
    """Each row's part of the mix's time per token: its workload's share of requests / its rate."""
    return workload.map(shares).astype("float64") / rate.astype("float64")


def rates(frame: pd.DataFrame, shares: Mapping[str, float], keys: Sequence[str]) -> pd.Series:
    """The mix's rate per `keys` group of rows (`workload`, `rate`: one row per workload): the
    request-weighted harmonic mean; NaN for a group missing one of the mix's workloads."""
    rows = frame[frame["workload"].isin(list(shares))]
    parts = _time_per_token(rows["workload"], rows["rate"], shares)
    total = parts.groupby([rows[k] for k in keys], dropna=False, sort=False).sum(min_count=len(shares))
    return 1.0 / total


def answer_table(
    step: pd.DataFrame,
    text: str | None,
    option: str = "--mix",
    default: dict[str, float] | None = None,
) -> tuple[pd.DataFrame, dict[str, float] | None]:
    """The step table recommend's answer comes from, with its shares: the mix's (`text`, else
    `default`, else equal shares) where the results name workloads, else `step` itself; MixError
    for a mix they cannot weigh."""
    if step["workload"].notna().any():
        shares = parse(text, option) if text else default or even(step)
        return table(step, shares, option), shares
    if text:
        raise MixError(f"{option}: these results name no workloads (-e workloads=...)")
    return step, None


def table(step: pd.DataFrame, shares: dict[str, float], option: str = "--mix") -> pd.DataFrame:
    """The step table of the mix: a config missing one of the mix's workloads at a level counts as failed."""
    measured = set(step["workload"].dropna().astype(str))
    missing = sorted(set(shares) - measured)
    if missing:
        raise MixError(
            f"{option}: {', '.join(missing)} not measured here (measured: {', '.join(sorted(measured))})"
        )
    t = step[step["concurrency"].notna() & step["workload"].isin(list(shares))].copy()
    t = t.astype({c: "object" for c in ["workload", *KEYS] if c != "concurrency"})
    t["_inv"] = _time_per_token(t["workload"], t["score"], shares)
    total = t.groupby(KEYS, dropna=False, sort=False)["_inv"].transform("sum")
    # d log(mix) / d log(rate_i) = (share_i / rate_i) / sum_j(share_j / rate_j); the parts' degrees
    # of freedom combine as Welch-Satterthwaite's.
    t["_var"] = (t["_inv"] / total) ** 2 * t["se2"]
    t["_v2df"] = t["_var"] ** 2 / t["se_df"]
    if "meets_sla" not in t.columns:
        t["meets_sla"] = pd.NA
    config_columns = [c for c in step.columns if c not in (*KEYS, "workload") and not c.startswith("_")]
    out = t.groupby(KEYS, dropna=False, sort=False).agg(
        **{c: (c, "first") for c in config_columns},
        _var=("_var", lambda v: v.sum(min_count=len(v))),
        _v2df=("_v2df", "sum"),
        _n=("workload", "nunique"),
        _fail=("failures", "sum"),
        _meets=("meets_sla", _all_known),
        _ttft=("ttft_p99_ms", "max"),
        _tpot=("tpot_p99_ms", "max"),
    )
    out = out.reset_index()
    # NaN for a config missing one of the mix's workloads (counted as failed below).
    out["score"] = rates(t.assign(rate=t["score"]), shares, KEYS).to_numpy()
    out["decode_tps"] = rates(t.assign(rate=t["decode_tps"]), shares, KEYS).to_numpy()
    out["n_ok"] = t.groupby(KEYS, dropna=False, sort=False)["n_ok"].min().to_numpy()
    out["se2"] = out.pop("_var")
    out["se_df"] = out["se2"] ** 2 / out.pop("_v2df")
    # The parts' own intervals do not hold for the mix: its own, as the step table makes them.
    out["tps_ci_lo"], out["tps_ci_hi"] = median_ci(out["score"], out["se2"], out["se_df"])
    out["failures"] = out.pop("_fail") + (out.pop("_n") < len(shares)).astype(int)
    out["ttft_p99_ms"], out["tpot_p99_ms"] = out.pop("_ttft"), out.pop("_tpot")
    out["meets_sla"] = out.pop("_meets")
    for col in ("goodput_rps", "total_tps", "user_tps"):
        out[col] = np.nan  # per-workload figures with no meaning summed over a mix
    out["workload"] = NAME
    return _against_baseline(out)


def _all_known(values: pd.Series) -> object:
    """Whether every workload meets the SLA; <NA> when none was judged (no SLA given)."""
    known = values.dropna()
    return bool(known.astype(bool).all()) if len(known) else pd.NA


def _against_baseline(out: pd.DataFrame) -> pd.DataFrame:
    """speedup_pct and its interval against the mix's baseline of the same host group and level."""
    level = [*HOST_KEYS, "concurrency"]
    sides = ["score", "se2", "se_df", "ci_basis"]
    base = out.loc[is_baseline(out), [*level, *sides]].drop_duplicates(level)
    m = out[level].merge(base.rename(columns=lambda c: c if c in level else f"b_{c}"), on=level, how="left")
    ratio = out["score"] / m["b_score"]
    lo, hi = log_ratio_ci(ratio, out["se2"], out["se_df"], m["b_se2"], m["b_se_df"])
    base_row = is_baseline(out)
    out["speedup_pct"] = (ratio - 1.0) * 100.0
    out["speedup_ci_lo"], out["speedup_ci_hi"] = lo.where(~base_row), hi.where(~base_row)
    out["within_noise"] = straddles_zero(out["speedup_ci_lo"], out["speedup_ci_hi"])
    # The verdict as the step table takes it (a one-launch interval widened by the launch prior).
    both = pd.concat([out, m[[f"b_{c}" for c in sides[1:]]]], axis=1)
    out["verdict_ci_lo"], out["verdict_ci_hi"] = verdict_ci(both, ratio, "b_")
    out["verdict"] = verdict(out["verdict_ci_lo"], out["verdict_ci_hi"]).where(~base_row)
    return out
