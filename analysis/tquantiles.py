"""The t distribution's 0.975 quantiles (two-sided 95%), stdlib only.

One table for the report's intervals (analysis.stats, vectorised with numpy) and the step search's
(analysis.search, which must start without numpy), so "within noise" means the same in both.
"""

from __future__ import annotations

# By degrees of freedom, from standard tables.
T975 = {
    1: 12.7062, 2: 4.3027, 3: 3.1824, 4: 2.7764, 5: 2.5706, 6: 2.4469, 7: 2.3646, 8: 2.3060,
    9: 2.2622, 10: 2.2281, 11: 2.2010, 12: 2.1788, 13: 2.1604, 14: 2.1448, 15: 2.1314,
    16: 2.1199, 17: 2.1098, 18: 2.1009, 19: 2.0930, 20: 2.0860, 21: 2.0796, 22: 2.0739,
    23: 2.0687, 24: 2.0639, 25: 2.0595, 26: 2.0555, 27: 2.0518, 28: 2.0484, 29: 2.0452,
    30: 2.0423, 40: 2.0211, 60: 2.0003, 120: 1.9799,
}  # fmt: skip
# (1/df, t) ascending in 1/df, for interpolation (t is close to linear in 1/df); 1/df = 0 is the
# normal's 1.96.
KNOTS = [(0.0, 1.96), *sorted((1.0 / df, t) for df, t in T975.items())]
