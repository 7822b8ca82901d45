"""Confidence intervals and noise measures over a config's repeats (vectorised over table rows).

Why t on log tok/s rather than a bootstrap: a sweep of a large model gets 2-5 repeats per config
(each is minutes of GPU time). A percentile bootstrap of so few values cannot produce an interval
wider than the values seen (with 2 repeats the median takes 3 values in all), so it claims
certainty it does not have; the t distribution pays for small n with wide tails. Logs make the
interval one of ratios (a speedup is a ratio; the interval is symmetric in log space and never
crosses zero tok/s) and let the two sides have different variances (Welch). It is deterministic
and a groupby computes it, no resampling. The interval is centred on the log of the ratio of
medians (the number the table shows, robust to one slow repeat); its half-width is Welch's
t(0.975, df) x standard error of the difference of mean log tok/s. Each side brings the variance
of its mean and that variance's degrees of freedom: over launches where a config was launched
more than once or the sweep measured launch-to-launch spread, over its repeats otherwise
(analysis.report.launches). Fewer than 2 repeats on a side and no launch spread: no variance, so
no interval (NaN, shown as such), never a made-up one.
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


# Two-sided 99% (0.995 quantiles), from standard tables: a stricter test where many cells are
# tested at once and a false flag costs attention (analysis.report.launches: unsteady launches).
_T995 = {1: 63.657, 2: 9.925, 3: 5.841, 4: 4.604, 5: 4.032, 6: 3.707, 7: 3.499, 8: 3.355, 9: 3.250,
         10: 3.169, 12: 3.055, 15: 2.947, 20: 2.845, 30: 2.750, 60: 2.660, 120: 2.617}  # fmt: skip
_INV_DF_995, _T_995 = (
    np.array(c) for c in zip(*[(0.0, 2.576), *sorted((1 / d, t) for d, t in _T995.items())], strict=True)
)


def t995(df: pd.Series) -> pd.Series:
    """t quantile for a two-sided 99% test at (possibly fractional) degrees of freedom."""
    inv = 1.0 / df.clip(lower=1.0).to_numpy(dtype="float64")
    return pd.Series(np.interp(inv, _INV_DF_995, _T_995), index=df.index).where(df.notna())


def welch(
    se2_a: pd.Series, df_a: pd.Series, se2_b: pd.Series, df_b: pd.Series
) -> tuple[pd.Series, pd.Series]:
    """Variance of a difference of two means and its Welch-Satterthwaite degrees of freedom."""
    se2 = se2_a + se2_b
    return se2, se2**2 / (se2_a**2 / df_a + se2_b**2 / df_b)


def ratio_ci(point: pd.Series, se2: pd.Series, df: pd.Series) -> tuple[pd.Series, pd.Series]:
    """95% interval, in % change, around the ratio `point`, from the variance of its log."""
    se = np.sqrt(se2)
    # Identical repeats on both sides: zero spread, a zero-width interval (not an undefined one).
    half = (t975(df) * se).where(se > 0, 0.0).where(se.notna())
    # A ratio of 0 (goodput: no request within the SLOs) is -100% at both ends, not a warning.
    with np.errstate(divide="ignore"):
        log_point = np.log(point)
    return (np.exp(log_point - half) - 1.0) * 100.0, (np.exp(log_point + half) - 1.0) * 100.0


def log_ratio_ci(
    point: pd.Series, se2_a: pd.Series, df_a: pd.Series, se2_b: pd.Series, df_b: pd.Series
) -> tuple[pd.Series, pd.Series]:
    """95% interval, in % change, of a/b around the ratio `point`, from each side's variance of its
    mean log tok/s and that variance's degrees of freedom (Welch)."""
    return ratio_ci(point, *welch(se2_a, df_a, se2_b, df_b))


def median_ci(median: pd.Series, se2: pd.Series, df: pd.Series) -> tuple[pd.Series, pd.Series]:
    """95% interval of one config's tok/s around its median, from the variance of its mean log tok/s."""
    half = (t975(df) * np.sqrt(se2)).where(df > 0)
    return median * np.exp(-half), median * np.exp(half)


def verdict(lo: pd.Series, hi: pd.Series) -> pd.Series:
    """`better` (interval above 0), `worse` (below 0), `within_noise`, <NA> without an interval."""
    words = np.where(lo > 0, "better", np.where(hi < 0, "worse", "within_noise"))
    return pd.Series(words, index=lo.index, dtype="object").where(lo.notna() & hi.notna())


def straddles_zero(lo: pd.Series, hi: pd.Series) -> pd.Series:
    """True where an interval contains 0 (within noise), <NA> where there is no interval."""
    inside = (lo <= 0) & (hi >= 0)
    return inside.astype("boolean").where(lo.notna() & hi.notna())
