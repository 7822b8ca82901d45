"""Launch-level noise of the step table: launch as a random effect, repeats nested (issue 24).

Kalibera & Jones (ISMM 2013) measure variance at each level of a hierarchical experiment. Here the
levels are launches of a config's server and repeats inside one launch. The log tok/s of repeat r
of launch l of config c is mu_c + L_cl + e_clr: a launch effect L (a fresh server, another moment,
whatever else the host ran) shared by its repeats, and repeat noise e. Repeats of one launch say
only how steady that launch was; the mean of a config moves between launches by Var(L) + Var(e)/m.

- tau2: the variance of one launch's mean log tok/s, pooled over every cell (config x level) of a
  host group (sweep, host, engine, model) measured in >= 2 launches; its degrees of freedom are
  sum(launches - 1), launches, never repeats. The baseline measured again at the end of a sweep
  gives it even with launches=1. Pooled, not per config: the launch effect is the host's and the
  hour's, shared by the configs compared, and one config's 2 launches (1 df, t = 12.7) would say
  nothing alone. A config whose own launches or repeats spread more keeps its own, larger spread.
- se2 of a cell's mean: max(tau2, own launch-mean spread, own within-launch var / m) / launches.
  With no repeated launch in the host group there is no tau2: se2 is within-launch (s2 / m, df
  m - 1, the interval of old sweeps), and `basis` says so.
- drift: the baseline's first and last launch of a level (by start time) differ by more than their
  within-launch noise (Welch 95%): the level is drifting, and tau2 is at least the baseline's own
  launch-mean spread, so that drift widens every interval instead of hiding in one config's number.
- unsteady: a launch whose first and second half of repeats (run order) disagree beyond their
  pooled noise (two-sided 99% t, halves of >= 2 repeats): the H200 case of one load measured twice
  in one launch, giving -8.9% and +27.6%.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.stats import t975, t995

LAUNCH = "launch_index"
LAUNCH_COLUMNS = [
    "launches", "se2", "se_df", "basis", "interfered", "unsteady", "launch_tau2", "launch_df",
    "drift_pct", "drift_ci_lo", "drift_ci_hi", "drifting",
]  # fmt: skip


def _launches(runs: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One row per launch of a cell: repeats with a tok/s, their mean and variance of log tok/s,
    whether its halves disagree, and when it started."""
    runs = runs.sort_values("run_index", kind="stable")
    grouped = runs.groupby([*keys, LAUNCH], dropna=False, sort=False, observed=True)
    n = grouped["log_tps"].transform("count")
    # Halves in run order (first half gets the smaller part); only repeats with a tok/s count.
    ok = runs["log_tps"].notna()
    rank = runs["log_tps"].notna().groupby([runs[k] for k in [*keys, LAUNCH]], dropna=False).cumsum()
    half = np.where(ok & (rank > n // 2), "h2", "h1")
    parts = (
        runs.assign(_half=half)
        .groupby([*keys, LAUNCH, "_half"], dropna=False, sort=False, observed=True)["log_tps"]
        .agg(["count", "mean", "var"])
        .unstack("_half")
    )
    out = grouped.agg(
        m=("log_tps", "count"),
        mean=("log_tps", "mean"),
        var=("log_tps", "var"),
        started=("started_at", "min"),
        interfered=("interfered", "sum"),
    )
    out["unsteady"] = _halves_disagree(parts).reindex(out.index).fillna(False).to_numpy()
    return out.reset_index()


def _halves_disagree(parts: pd.DataFrame) -> pd.Series:
    """Per launch: a pooled two-sample t test of its two halves, two-sided 99%."""
    cols = {(s, h): parts[(s, h)] if (s, h) in parts.columns else np.nan for s in ("count", "mean", "var")
            for h in ("h1", "h2")}  # fmt: skip
    n1, n2 = cols[("count", "h1")], cols[("count", "h2")]
    df = n1 + n2 - 2
    pooled = ((n1 - 1) * cols[("var", "h1")] + (n2 - 1) * cols[("var", "h2")]) / df
    se = np.sqrt(pooled * (1 / n1 + 1 / n2))
    diff = (cols[("mean", "h1")] - cols[("mean", "h2")]).abs()
    enough = (n1 >= 2) & (n2 >= 2)
    flagged = enough & (diff > t995(pd.Series(df, index=parts.index)) * se)
    return pd.Series(flagged, index=parts.index).fillna(False).astype(bool)


def _drift(launch: pd.DataFrame, group: list[str], baseline: pd.Series) -> pd.DataFrame:
    """Per level (group): the baseline's last launch against its first, in %, with a 95% interval."""
    base = launch[baseline & launch["m"].gt(0)].sort_values("started", kind="stable")
    by = base.groupby(group, dropna=False, sort=False, observed=True)
    first, last = by.nth(0).set_index(group), by.nth(-1).set_index(group)
    count = by.size()
    first, last = (
        first[count.reindex(first.index).gt(1).to_numpy()],
        last[count.reindex(last.index).gt(1).to_numpy()],
    )
    a, b = last["var"] / last["m"], first["var"] / first["m"]
    se = np.sqrt(a + b)
    df = (a + b) ** 2 / (a**2 / (last["m"] - 1) + b**2 / (first["m"] - 1))
    diff = last["mean"] - first["mean"]
    half = t975(df) * se
    out = pd.DataFrame(
        {
            "drift_pct": np.expm1(diff) * 100.0,
            "drift_ci_lo": np.expm1(diff - half) * 100.0,
            "drift_ci_hi": np.expm1(diff + half) * 100.0,
        }
    )
    out["drifting"] = (out["drift_ci_lo"] > 0) | (out["drift_ci_hi"] < 0)
    return out.reset_index()


def launch_table(
    runs: pd.DataFrame, group: list[str], host_group: list[str], baseline: pd.Series
) -> pd.DataFrame:
    """Per cell (group + config_id): LAUNCH_COLUMNS. `runs` carries log_tps (NaN for a failed repeat);
    `baseline` marks its rows of the no-speculation reference."""
    runs = runs.assign(
        **{LAUNCH: runs[LAUNCH].fillna(1) if LAUNCH in runs else 1},
        interfered=runs["interfered"].fillna(False).astype(bool) if "interfered" in runs else False,
        _base=baseline.to_numpy(),
    )
    keys = [*group, "config_id"]
    launch = _launches(runs, [*keys, "_base"])
    launch = launch[launch["m"].gt(0) | launch["interfered"].gt(0)]
    done = launch[launch["m"].gt(0)]
    # Within-launch sums of squares and their degrees of freedom, pooled over a cell's launches.
    done = done.assign(
        _ss=(done["var"] * (done["m"] - 1)).fillna(0.0), _dfw=(done["m"] - 1).astype("float64")
    )
    cell = done.groupby(keys, dropna=False, sort=False, observed=True).agg(
        launches=("mean", "count"),
        lmean_var=("mean", "var"),
        m=("m", "sum"),
        ss=("_ss", "sum"),
        df_w=("_dfw", "sum"),
        _base=("_base", "first"),
    )
    cell["w"] = (cell["ss"] / cell["df_w"]).where(cell["df_w"] > 0) / (cell["m"] / cell["launches"])
    cell = cell.reset_index()

    drift = _drift(done, group, done["_base"].astype(bool))
    cell = (
        cell.merge(drift, on=group, how="left")
        if not drift.empty
        else cell.assign(drift_pct=np.nan, drift_ci_lo=np.nan, drift_ci_hi=np.nan, drifting=pd.NA)
    )
    repeated = cell[cell["launches"] > 1].assign(_dof=lambda c: c["launches"] - 1)
    repeated = repeated.assign(_ss=repeated["lmean_var"] * repeated["_dof"])
    pooled = repeated.groupby(host_group, dropna=False, sort=False, observed=True).agg(
        launch_df=("_dof", "sum"), _ss=("_ss", "sum")
    )
    pooled["launch_tau2"] = pooled["_ss"] / pooled["launch_df"]
    # Drift beyond noise: the baseline's own launch spread (its drift) is the least launch variance.
    drifted = repeated[repeated["_base"].astype(bool) & repeated["drifting"].fillna(False).astype(bool)]
    floor = drifted.groupby(host_group, dropna=False, sort=False, observed=True)["lmean_var"].max()
    pooled["launch_tau2"] = np.fmax(pooled["launch_tau2"], floor.reindex(pooled.index))
    cell = cell.merge(pooled[["launch_df", "launch_tau2"]].reset_index(), on=host_group, how="left")
    cell["launch_df"] = cell["launch_df"].fillna(0.0)

    has_tau = cell["launch_df"] > 0
    own = np.fmax(cell["lmean_var"].where(cell["launches"] > 1), cell["launch_tau2"])
    v = np.fmax(own, cell["w"]).where(has_tau, cell["w"])
    # The degrees of freedom of whichever spread was taken.
    by_launch = has_tau & (cell["w"].isna() | (own >= cell["w"]))
    cell["se_df"] = cell["launch_df"].where(by_launch, cell["df_w"]).where(v.notna())
    cell["se2"] = v / cell["launches"]
    cell["basis"] = np.where(
        cell["launches"] > 1, "launches", np.where(has_tau, "launch_var", "within_launch")
    )
    flags = launch.groupby(keys, dropna=False, sort=False, observed=True).agg(
        interfered=("interfered", "sum"), unsteady=("unsteady", "sum")
    )
    cell = cell.merge(flags.reset_index(), on=keys, how="left")
    return cell[[*keys, *LAUNCH_COLUMNS]]
