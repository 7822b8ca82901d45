"""Confidence intervals and noise measures over a config's repeats (vectorised over table rows).

Why t on log tok/s rather than a bootstrap: a sweep of a large model gets 2-5 repeats per config
(each is minutes of GPU time). A percentile bootstrap of so few values cannot produce an interval
wider than the values seen (with 2 repeats the median takes 3 values in all), so it claims
certainty it does not have; the t distribution pays for small n with wide tails. Logs make the
interval one of ratios (a speedup is a ratio; the interval is symmetric in log space and never
crosses zero tok/s) and let the two sides have different variances (Welch). It is deterministic
and a groupby computes it, no resampling. The interval is centred on the log of the ratio of
medians (the number the table shows, robust to one slow repeat); its half-width is Welch's
t(0.975, df) x standard error of the difference of mean log tok/s. Fewer than 2 repeats on either
side: no variance, so no interval (NaN, shown as such), never a made-up one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.tquantiles import KNOTS

# Interpolated in 1/df over the shared table (analysis.tquantiles).
_INV_DF, _T = (np.array(col) for col in zip(*KNOTS, strict=True))


def t975(df: pd.Series) -> pd.Series:
    """t quantile for a two-sided 95% interval at (possibly fractional) degrees of freedom."""
    inv = 1.0 / df.clip(lower=1.0).to_numpy(dtype="float64")
    return pd.Series(np.interp(inv, _INV_DF, _T), index=df.index).where(df.notna())


def log_ratio_ci(
    point: pd.Series, n_a: pd.Series, var_a: pd.Series, n_b: pd.Series, var_b: pd.Series
) -> tuple[pd.Series, pd.Series]:
    """95% interval, in % change, of a/b around the ratio `point`, from each side's log variance."""
    a = var_a / n_a
    b = var_b / n_b
    se = np.sqrt(a + b)
    df = (a + b) ** 2 / (a**2 / (n_a - 1) + b**2 / (n_b - 1))
    # Identical repeats on both sides: zero spread, a zero-width interval (not an undefined one).
    half = (t975(df) * se).where(se > 0, 0.0).where(se.notna())
    log_point = np.log(point)
    return (np.exp(log_point - half) - 1.0) * 100.0, (np.exp(log_point + half) - 1.0) * 100.0


def median_ci(median: pd.Series, n: pd.Series, var_log: pd.Series) -> tuple[pd.Series, pd.Series]:
    """95% interval of one config's tok/s around its median, from its log variance (error bars)."""
    half = (t975(n - 1) * np.sqrt(var_log / n)).where(n > 1)
    return median * np.exp(-half), median * np.exp(half)


def straddles_zero(lo: pd.Series, hi: pd.Series) -> pd.Series:
    """True where an interval contains 0 (within noise), <NA> where there is no interval."""
    inside = (lo <= 0) & (hi >= 0)
    return inside.astype("boolean").where(lo.notna() & hi.notna())
