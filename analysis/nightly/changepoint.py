"""Change points of one nightly series: E-divisive means with a Student's t significance test.

The method of Apache Otava (formerly DataStax Hunter), written out here in numpy and the stdlib so
the analysis needs no scipy:
1. split: the E-divisive candidate of an interval is the split tau (with its far end kappa) that
   maximises the energy statistic Q-hat between series[start:tau] and series[tau:kappa]
   (Matteson & James 2014, distances |x_i - x_j|). Each round takes the best candidate over the
   intervals between the change points found so far and keeps it while Student's t test of the
   points between its neighbouring change points (left of it against right of it) gives
   p <= 10 x alpha; the first weaker candidate ends the search.
2. merge: the weakest change point (largest p, or, when all pass, the smallest change) is removed
   while its p > alpha or its change < min_change, and its neighbours are tested again over their
   new, longer segments.
Segments may be a single point: a nightly must say the night something changed, not a week later.
The split runs over the whole series (a cell's last `nights` nights), not over Otava's overlapping
50-point windows, which are there for series of thousands of points.
The series are logs (of tok/s, accept length, step time), so a change is a ratio and its interval
is symmetric in log space, as elsewhere in the analysis (analysis.stats).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from analysis.nightly.noise import NO_PRIOR, Prior
from analysis.tquantiles import KNOTS

_INV_DF, _T975 = (np.array(col) for col in zip(*KNOTS, strict=True))


@dataclass(frozen=True)
class Comparison:
    """Student's t test (pooled variance) of two samples of log values: before against after."""

    mean_before: float
    mean_after: float
    p_value: float  # two-sided
    half_ci: float  # 95% half-width of mean_after - mean_before; nan without degrees of freedom

    @property
    def ratio(self) -> float:
        """After / before on the original scale (0.95 = a 5% drop)."""
        return math.exp(self.mean_after - self.mean_before)

    @property
    def ci(self) -> tuple[float, float]:
        """95% interval of the ratio."""
        delta = self.mean_after - self.mean_before
        return math.exp(delta - self.half_ci), math.exp(delta + self.half_ci)

    @property
    def magnitude(self) -> float:
        """Size of the change as a share, the same whichever side is the reference (Otava's)."""
        return math.exp(abs(self.mean_after - self.mean_before)) - 1.0


@dataclass(frozen=True)
class Change:
    """A change point: series[start:index] against series[index:end], its neighbouring segments."""

    index: int  # first point of the new segment
    start: int
    end: int
    test: Comparison


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for aa in (
            m * (b - m) * x / ((a + 2 * m - 1.0) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1.0)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    # The fraction converges fast on this side of the mean; the other side by symmetry.
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with df degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def t975(df: float) -> float:
    """t quantile of a two-sided 95% interval, from the analysis's shared table."""
    return float(np.interp(1.0 / max(df, 1.0), _INV_DF, _T975))


def ttest(before: np.ndarray, after: np.ndarray, prior: Prior = NO_PRIOR) -> Comparison:
    """Student's t test with pooled variance, moderated by a fleet's `prior` (analysis.nightly.noise);
    p = 1 when there is no degree of freedom."""
    n1, n2 = len(before), len(after)
    mean_before, mean_after = float(before.mean()), float(after.mean())
    own = n1 + n2 - 2
    if own < 1 and not prior.given:
        return Comparison(mean_before, mean_after, 1.0, math.nan)
    # A one-point side adds nothing to the pooled variance; the other side's spread stands for it.
    residuals = ((before - mean_before) ** 2).sum() + ((after - mean_after) ** 2).sum()
    pooled, df = prior.moderate(float(residuals) / own if own else 0.0, own)
    se = math.sqrt(pooled * (1.0 / n1 + 1.0 / n2))
    delta = mean_after - mean_before
    if se == 0.0:  # both sides constant: t is 0/0 or infinite
        return Comparison(mean_before, mean_after, 1.0 if delta == 0.0 else 0.0, 0.0)
    return Comparison(mean_before, mean_after, t_two_sided_p(delta / se, df), t975(df) * se)


def compare(series: np.ndarray, start: int, index: int, end: int) -> Change:
    """The change point at `index` tested over series[start:end]."""
    return Change(index, start, end, ttest(series[start:index], series[index:end]))


def block_sums(series: np.ndarray) -> np.ndarray:
    """2-D prefix sums of the distance matrix: any block's sum in four lookups."""
    distances = np.abs(series[:, None] - series[None, :])
    prefix = np.zeros((len(series) + 1, len(series) + 1))
    prefix[1:, 1:] = distances.cumsum(axis=0).cumsum(axis=1)
    return prefix


def candidate(prefix: np.ndarray, start: int, end: int) -> tuple[int, float]:
    """The E-divisive split of series[start:end]: (tau, Q-hat), maximised over tau and kappa."""

    def block(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> np.ndarray:
        return prefix[b, d] - prefix[a, d] - prefix[b, c] + prefix[a, c]

    tau, kappa = np.triu_indices(end - start + 1, k=1)
    keep = tau > 0
    tau, kappa = tau[keep] + start, kappa[keep] + start
    s = np.full_like(tau, start)
    n, m = (tau - start).astype(float), (kappa - tau).astype(float)
    between = block(s, tau, tau, kappa)
    within_left = block(s, tau, s, tau) / 2.0
    within_right = block(tau, kappa, tau, kappa) / 2.0
    # One-point sides have no within-sample distances: their term is zero, not undefined.
    left_weight = np.divide(2.0 * m, (m + n) * (n - 1.0), out=np.zeros_like(n), where=n > 1)
    right_weight = np.divide(2.0 * n, (m + n) * (m - 1.0), out=np.zeros_like(m), where=m > 1)
    q = 2.0 / (m + n) * between - left_weight * within_left - right_weight * within_right
    best = int(np.argmax(q))
    return int(tau[best]), float(q[best])


def _tested(series: np.ndarray, indexes: list[int]) -> list[Change]:
    """Each change point tested against its neighbours' segments."""
    ends = [0, *indexes, len(series)]
    return [compare(series, ends[i], ends[i + 1], ends[i + 2]) for i in range(len(indexes))]


def split(series: np.ndarray, alpha: float) -> list[int]:
    """Change points found top-down, each round's best candidate kept while p <= alpha."""
    prefix = block_sums(series)
    found: list[int] = []
    while True:
        ends = [0, *found, len(series)]
        options = [candidate(prefix, a, b) for a, b in itertools.pairwise(ends) if b - a > 1]
        if not options:
            return found
        tau, _ = max(options, key=lambda o: o[1])
        start = max(e for e in ends if e < tau)
        end = min(e for e in ends if e > tau)
        if compare(series, start, tau, end).test.p_value > alpha:
            return found
        found = sorted([*found, tau])


def merge(series: np.ndarray, indexes: list[int], alpha: float, min_change: float) -> list[Change]:
    """Drop the weakest change point until every one left has p <= alpha and a change >= min_change."""
    changes = _tested(series, indexes)
    while changes:
        weakest = max(changes, key=lambda c: c.test.p_value)
        if weakest.test.p_value <= alpha:
            weakest = min(changes, key=lambda c: c.test.magnitude)
            if weakest.test.magnitude >= min_change:
                return changes
        changes = _tested(series, [c.index for c in changes if c is not weakest])
    return changes


def change_points(series: np.ndarray, alpha: float, min_change: float) -> list[Change]:
    """Otava's change points of a series (log values, oldest first)."""
    # Otava's first pass is looser (10 x alpha below 0.05) so that merging, which tests each
    # point over its final neighbours, decides; a strict first pass would stop too early.
    first = alpha * 10.0 if alpha < 0.05 else alpha * 2.0 if alpha < 0.5 else alpha
    return merge(series, split(series, first), alpha, min_change)
