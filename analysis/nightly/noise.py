"""The fleet's night-to-night noise, borrowed by each cell: an empirical-Bayes prior on variances.

A cell's own nights estimate its noise poorly: on 15 degrees of freedom a one-sided p <= 0.005
needs t >= 2.95 where a known noise level would need z >= 2.58, and that gap costs a recent drop
much of its chance of being found on its second night. Cells of one fleet are mostly as noisy as
each other, so their variances are pooled the way limma moderates gene-wise variances (Smyth
2004, "Linear models and empirical Bayes methods for assessing differential expression in
microarray experiments"): the cells' variances are taken as scaled chi-square draws around a
prior s0^2 with d0 degrees of freedom, fitted by moments of log s^2; a cell's test then uses
(d0 s0^2 + d s^2) / (d0 + d) on d0 + d degrees of freedom. When the cells differ in noise, d0
comes out small and each keeps its own; when they agree, d0 is large (at most the cells' own
degrees of freedom together) and a test is nearly as strong as one with the noise known.
The polygamma functions are written out here (numpy, no scipy), as limma's fitFDist uses them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Below this many cells with a variance the spread of log s^2 says nothing: no prior.
MIN_CELLS = 3


@dataclass(frozen=True)
class Prior:
    """The fleet's noise: variance s2 (of a log series: tok/s, accept length or step time) worth
    df degrees of freedom (0: no prior)."""

    s2: float = math.nan
    df: float = 0.0
    cells: int = 0  # cells it was fitted on

    @property
    def given(self) -> bool:
        """Whether there is a prior (NO_PRIOR has none)."""
        return self.df > 0.0

    @property
    def cv_pct(self) -> float | None:
        """The noise as a night-to-night CV in % (the SD of a log series), None without a prior."""
        return math.sqrt(self.s2) * 100.0 if self.given else None

    def moderate(self, s2: float, df: float) -> tuple[float, float]:
        """A cell's variance and degrees of freedom with the prior's added."""
        if not self.given:
            return s2, df
        return (self.df * self.s2 + df * s2) / (self.df + df), self.df + df


NO_PRIOR = Prior()


def _shifted(x: np.ndarray, order: int) -> tuple[np.ndarray, np.ndarray]:
    """x moved up to at least 6 by the recurrence, and what the moves contribute to psi^(order)."""
    x = np.array(x, dtype=float)
    total = np.zeros_like(x)
    low = x < 6.0
    while low.any():
        # psi(x) = psi(x + 1) - 1/x; psi'(x) = psi'(x + 1) + 1/x^2; psi''(x) = psi''(x + 1) - 2/x^3
        total[low] += (-1.0, 1.0, -2.0)[order] / x[low] ** (order + 1)
        x[low] += 1.0
        low = x < 6.0
    return x, total


def digamma(x: np.ndarray) -> np.ndarray:
    """psi(x) for x > 0 (asymptotic series above 6: within 1e-8)."""
    x, total = _shifted(x, 0)
    inv2 = 1.0 / x**2
    return total + np.log(x) - 0.5 / x - inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 / 252))


def trigamma(x: np.ndarray) -> np.ndarray:
    """psi'(x) for x > 0."""
    x, total = _shifted(x, 1)
    inv2 = 1.0 / x**2
    return total + 1.0 / x + inv2 / 2.0 + inv2 / x * (1 / 6 - inv2 * (1 / 30 - inv2 * (1 / 42 - inv2 / 30)))


def tetragamma(x: np.ndarray) -> np.ndarray:
    """psi''(x) for x > 0."""
    x, total = _shifted(x, 2)
    inv2 = 1.0 / x**2
    return total - inv2 * (1.0 + 1.0 / x + inv2 * (0.5 - inv2 * (1 / 6 - inv2 * (1 / 6 - 0.3 * inv2))))


def trigamma_inverse(y: float) -> float:
    """x with psi'(x) = y: limma's Newton iteration, from 0.5 + 1/y."""
    if y > 1e7:
        return 1.0 / math.sqrt(y)
    if y < 1e-6:
        return 1.0 / y
    x = 0.5 + 1.0 / y
    for _ in range(50):
        tri = float(trigamma(np.array([x]))[0])
        step = tri * (1.0 - tri / y) / float(tetragamma(np.array([x]))[0])
        x += step
        if -step / x < 1e-8:
            break
    return x


def fit(s2: np.ndarray, df: np.ndarray) -> Prior:
    """The prior of cells' variances s2 on df degrees of freedom (limma's fitFDist, no covariate)."""
    keep = (df >= 1) & np.isfinite(s2) & (s2 > 0)
    s2, df = s2[keep], df[keep]
    if len(s2) < MIN_CELLS:
        return NO_PRIOR
    e = np.log(s2) - digamma(df / 2.0) + np.log(df / 2.0)
    mean = float(e.mean())
    spread = float(e.var(ddof=1)) - float(trigamma(df / 2.0).mean())
    # No more spread than chi-square draws of one variance give: limma's d0 is infinite. The prior
    # holds no more than the nights it was fitted on (a handful of cells can agree by luck), so d0
    # is at most their degrees of freedom.
    total = float(df.sum())
    d0 = min(2.0 * trigamma_inverse(spread), total) if spread > 0 else total
    return Prior(float(math.exp(mean + digamma(np.array([d0 / 2.0]))[0] - math.log(d0 / 2.0))), d0, len(s2))
