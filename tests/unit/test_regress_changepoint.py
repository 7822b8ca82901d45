"""The change-point maths on exact series: Student's t, the E-divisive split and merge."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.nightly.changepoint import (
    betainc,
    block_sums,
    candidate,
    change_points,
    merge,
    t975,
    t_two_sided_p,
    ttest,
)
from analysis.tquantiles import T975

WIGGLE = np.array([0.004, -0.003, 0.001, -0.004, 0.002, 0.0, -0.002, 0.003])  # log units, deterministic


def level(value: float, nights: int) -> np.ndarray:
    """`nights` log values around log(value), wiggling by the fixed pattern (never constant)."""
    return math.log(value) + np.resize(WIGGLE, nights)


def test_t_p_values_agree_with_the_shared_t_table() -> None:
    for df, t in T975.items():
        assert t_two_sided_p(t, df) == pytest.approx(0.05, abs=2e-4), df
        assert t975(df) == pytest.approx(t), df
    assert t_two_sided_p(0.0, 5) == 1.0
    assert t_two_sided_p(1.0, 1) == pytest.approx(0.5, abs=1e-12)  # Cauchy: P(|T| > 1) = 1/2
    assert t_two_sided_p(3.0, 10) == pytest.approx(0.0133436550, rel=1e-8)
    assert t_two_sided_p(-3.0, 10) == t_two_sided_p(3.0, 10)
    assert t_two_sided_p(math.inf, 3) == 0.0


def test_incomplete_beta_closed_forms() -> None:
    for x in (0.05, 0.3, 0.5, 0.77, 0.99):
        assert betainc(1.0, 1.0, x) == pytest.approx(x, rel=1e-12)
        assert betainc(3.0, 1.0, x) == pytest.approx(x**3, rel=1e-12)
        assert betainc(1.0, 4.0, x) == pytest.approx(1.0 - (1.0 - x) ** 4, rel=1e-12)
        assert betainc(2.5, 0.5, x) == pytest.approx(1.0 - betainc(0.5, 2.5, 1.0 - x), rel=1e-10)
    assert (betainc(2.0, 3.0, 0.0), betainc(2.0, 3.0, 1.0)) == (0.0, 1.0)


def test_pooled_t_test_by_hand() -> None:
    # Means 2 and 5, pooled variance (2 + 2) / 4 = 1, se = sqrt(2/3), t = 3.674 on 4 df.
    test = ttest(np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0]))
    assert (test.mean_before, test.mean_after) == (2.0, 5.0)
    assert test.p_value == pytest.approx(0.021311641, rel=1e-6)
    assert test.half_ci == pytest.approx(2.7764 * math.sqrt(2.0 / 3.0), rel=1e-4)
    # A one-night side: the other side's spread stands for both (variance 1 over 2 df, se sqrt(4/3)).
    one = ttest(np.array([1.0, 2.0, 3.0]), np.array([10.0]))
    assert one.p_value == t_two_sided_p(8.0 / math.sqrt(4.0 / 3.0), 2)
    assert ttest(np.array([1.0]), np.array([2.0])).p_value == 1.0  # no degree of freedom
    flat = ttest(np.array([1.0, 1.0]), np.array([1.5, 1.5]))
    assert (flat.p_value, flat.half_ci) == (0.0, 0.0)  # constant sides: a certain change


def test_e_divisive_candidate_of_a_clean_step() -> None:
    # Six 0s then four 1s: every cross pair is 1 apart, no within distance: Q = 2/10 x 24 = 4.8 at
    # tau = 6 (kappa = 10); a shorter right side gives less (kappa = 9: 2/9 x 18 = 4.0).
    series = np.array([0.0] * 6 + [1.0] * 4)
    assert candidate(block_sums(series), 0, 10) == (6, pytest.approx(4.8))
    # Within a later interval the indexes are the series'.
    longer = np.concatenate([[5.0, 5.0], series])
    assert candidate(block_sums(longer), 2, 12) == (8, pytest.approx(4.8))


def test_two_steps_are_found_at_their_first_nights_with_their_sizes() -> None:
    series = np.concatenate([level(100.0, 10), level(110.0, 8), level(99.0, 9)])
    found = change_points(series, alpha=0.005, min_change=0.02)
    assert [c.index for c in found] == [10, 18]
    assert [round(c.test.ratio, 3) for c in found] == [1.1, 0.9]
    lo, hi = found[1].test.ci
    assert lo < 0.9 < hi and hi - lo < 0.01
    assert (found[0].start, found[0].end, found[1].start, found[1].end) == (0, 18, 10, 27)


def test_a_drop_on_the_last_night_alone_is_a_change() -> None:
    series = np.concatenate([level(100.0, 12), [math.log(93.0)]])
    (found,) = change_points(series, alpha=0.005, min_change=0.02)
    assert found.index == 12 and found.test.ratio == pytest.approx(0.93, abs=0.002)
    assert found.test.p_value < 1e-6


def test_steady_series_have_no_change_points() -> None:
    assert change_points(level(100.0, 30), alpha=0.005, min_change=0.0) == []
    assert change_points(np.full(20, math.log(50.0)), alpha=0.005, min_change=0.0) == []


def test_merge_drops_changes_below_min_change_however_significant() -> None:
    series = np.concatenate([level(100.0, 12), level(101.5, 12)])  # 1.5%, far beyond the wiggle
    assert [c.index for c in change_points(series, alpha=0.005, min_change=0.0)] == [12]
    assert change_points(series, alpha=0.005, min_change=0.02) == []


def test_merge_drops_the_weakest_point_and_tests_its_neighbours_again() -> None:
    # A real step at 10 and a spurious split at 5 inside the first level.
    series = np.concatenate([level(100.0, 10), level(108.0, 10)])
    kept = merge(series, [5, 10], alpha=0.005, min_change=0.0)
    assert [c.index for c in kept] == [10]
    # Tested again over its new neighbours: the whole first level against the second.
    assert (kept[0].start, kept[0].end) == (0, 20) and kept[0].test.ratio == pytest.approx(1.08, abs=1e-3)
    assert merge(series, [5, 10], alpha=1.0, min_change=0.0) != kept  # at alpha 1 nothing is weak
    assert merge(series, [10], alpha=0.005, min_change=0.09) == []  # an 8% change is below 9%
