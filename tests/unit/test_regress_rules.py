"""One cell's verdict on exact nights: which rule decides, the acceptance gate, the attribution."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from analysis.nightly.changepoint import ttest
from analysis.nightly.judge import Nights, judge, recent_drop, window_rule
from analysis.nightly.noise import Prior
from analysis.nightly.settings import Settings

WIGGLE = np.array([0.003, -0.002, 0.001, -0.003, 0.002, 0.0, -0.001, 0.002])  # relative, deterministic
ACCEPT, STEP_MS = 2.5, 20.0


def cell(
    accept: list[float],
    step_ms: list[float],
    *,
    engine_step: bool = False,
    outside: list[float] | None = None,
    versions: list[str] | None = None,
) -> Nights:
    """Nights of a speculative cell: tok/s = accept / step (x `outside`, time lost outside steps)."""
    a, st = np.array(accept), np.array(step_ms)
    tps = a / st * 1000.0 * (np.array(outside) if outside else 1.0)
    n = len(a)
    same = np.ones(n, dtype=bool) if versions is None else np.array([v == versions[-1] for v in versions])
    engine = st if engine_step else np.full(n, np.nan)
    return Nights(tps, a, engine, a / tps * 1000.0, same)


def steady(n: int, value: float, shift: float = 1.0, at: int | None = None) -> list[float]:
    """n nights of `value` with the fixed wiggle, multiplied by `shift` from night `at` on."""
    values = value * (1.0 + np.resize(WIGGLE, n))
    if at is not None:
        values[at:] *= shift
    return list(values)


def test_window_rule_median_and_mad_band() -> None:
    tps = np.array([100.0, 80.0, 120.0, 90.0, 110.0, 92.0])  # median 100, MAD 10: band 30
    before = np.arange(5)
    w = window_rule(tps, before, Settings())
    assert (w.verdict, w.baseline, w.nights, w.band) == ("unchanged", 100.0, 5, 30.0)
    assert w.change == pytest.approx(-0.08)
    tps[-1] = 60.0
    assert window_rule(tps, before, Settings()).verdict == "regressed"
    assert window_rule(tps, before[:0], Settings()) is None


def test_a_step_time_rise_is_attributed_to_step_time_from_its_first_night() -> None:
    v = judge(cell(steady(12, ACCEPT), steady(12, STEP_MS, 1.1, at=9)), Settings())
    assert (v.verdict, v.rule, v.component, v.changed_at) == ("regressed", "change_point", "step_time", 9)
    assert v.tps.ratio == pytest.approx(1 / 1.1, abs=0.005) and v.step.ratio == pytest.approx(1.1, abs=0.005)
    assert v.accept.p_value > 0.05 and v.step_source == "derived" and v.nights_before == 9


def test_an_acceptance_drop_is_attributed_to_acceptance() -> None:
    v = judge(cell(steady(12, ACCEPT, 0.9, at=10), steady(12, STEP_MS)), Settings())
    assert (v.verdict, v.component, v.changed_at) == ("regressed", "acceptance", 10)
    assert v.accept.ratio == pytest.approx(0.9, abs=0.005)


def test_both_components_moving_is_both() -> None:
    v = judge(cell(steady(12, ACCEPT, 0.93, at=10), steady(12, STEP_MS, 1.07, at=10)), Settings())
    assert (v.verdict, v.component, v.changed_at) == ("regressed", "both", 10)


def test_time_lost_outside_the_verify_step_is_none_with_engine_step_times() -> None:
    outside = steady(12, 1.0, 0.9, at=10)  # tok/s down 10%, engine step time and acceptance flat
    v = judge(cell(steady(12, ACCEPT), steady(12, STEP_MS), engine_step=True, outside=outside), Settings())
    assert (v.verdict, v.component, v.step_source) == ("regressed", "none", "engine")
    # The same nights with step times derived from tok/s: the loss reads as step time.
    derived = judge(cell(steady(12, ACCEPT), steady(12, STEP_MS), outside=outside), Settings())
    assert (derived.component, derived.step_source) == ("step_time", "derived")


def test_an_improvement_names_what_got_better() -> None:
    v = judge(cell(steady(12, ACCEPT), steady(12, STEP_MS, 1 / 1.2, at=8)), Settings())
    assert (v.verdict, v.component, v.changed_at) == ("improved", "step_time", 8)


def test_acceptance_collapse_fails_the_cell_whatever_tok_s_did() -> None:
    # The draft stops helping (accept length 2.5 -> 1.1) while the verify step gets cheaper: tok/s
    # moves 1%, which no tok/s rule calls a change.
    accept = [*steady(10, ACCEPT)[:8], 1.1, 1.1]
    step = steady(10, STEP_MS)[:8] + [STEP_MS * 1.1 / ACCEPT * 1.01] * 2
    v = judge(cell(accept, step), Settings())
    assert (v.verdict, v.rule, v.component, v.changed_at) == ("regressed", "accept_gate", "acceptance", 8)
    assert abs(v.tps.ratio - 1.0) < 0.02
    # A lower minimum and no relative share: the same nights pass.
    assert judge(cell(accept, step), Settings(min_accept_length=1.0, accept_drop=0.9)).verdict == "unchanged"


def test_a_relative_acceptance_drop_beyond_the_share_fails_the_cell() -> None:
    accept = [*steady(10, ACCEPT)[:9], ACCEPT * 0.75]
    step = [*steady(10, STEP_MS)[:9], STEP_MS * 0.75]  # tok/s unchanged
    v = judge(cell(accept, step), Settings())
    assert (v.verdict, v.rule, v.changed_at) == ("regressed", "accept_gate", 9)
    assert judge(cell(accept, step), Settings(accept_drop=0.3)).verdict == "unchanged"


def test_failed_new_and_version_changed_cells() -> None:
    base = cell(steady(6, ACCEPT), steady(6, STEP_MS))
    failed = dataclasses.replace(base, tps=np.array([*base.tps[:4], np.nan, np.nan]))
    assert (judge(failed, Settings()).verdict, judge(failed, Settings()).changed_at) == ("failed", 4)
    only = dataclasses.replace(base, tps=np.array([np.nan] * 5 + [100.0]))
    assert judge(only, Settings()).verdict == "new"
    # Three nights, the last under a new engine: too few to compare across versions.
    three = cell(steady(3, ACCEPT), steady(3, STEP_MS, 1.3, at=2), versions=["0.5.0", "0.5.0", "0.5.1"])
    assert judge(three, Settings()).verdict == "version_changed"
    # Six nights: the change-point rule compares across the upgrade.
    six = cell(steady(6, ACCEPT), steady(6, STEP_MS, 1.3, at=5), versions=["0.5.0"] * 5 + ["0.5.1"])
    assert (judge(six, Settings()).verdict, judge(six, Settings()).rule) == ("regressed", "change_point")


def test_a_change_stays_news_for_window_nights() -> None:
    nights = cell(steady(16, ACCEPT), steady(16, STEP_MS, 1.1, at=9))  # 7 nights at the new level
    assert judge(nights, Settings(window=5)).verdict == "unchanged"
    assert (judge(nights, Settings(window=7)).verdict, judge(nights, Settings(window=7)).changed_at) == (
        "regressed", 9,
    )  # fmt: skip


def test_rule_either_adds_the_window_rule_and_window_uses_it_alone() -> None:
    # Noisy early nights hide a 7% drop from the t test; the last five nights are steady, so the
    # window rule sees it beyond 5% and 3 x MAD.
    early = [1.0, 1.12, 0.9, 1.1, 0.88, 1.09, 0.91]
    step = [STEP_MS / f for f in early] + steady(5, STEP_MS) + [STEP_MS / 0.93]
    nights = cell([ACCEPT] * len(step), step)
    assert judge(nights, Settings()).verdict == "unchanged"
    assert (judge(nights, Settings(rule="either")).verdict, judge(nights, Settings(rule="either")).rule) == (
        "regressed", "window",
    )  # fmt: skip
    assert judge(nights, Settings(rule="window")).verdict == "regressed"


def test_a_young_history_is_also_judged_by_the_window_rule() -> None:
    # Four nights, 3x slower on the last two, which disagree by 20%: two degrees of freedom leave
    # the t test at p ~ 0.008, short of alpha; the window rule sees -70% and fails the cell.
    nights = cell([ACCEPT] * 4, [STEP_MS, STEP_MS, STEP_MS * 300 / 110, STEP_MS * 300 / 90])
    v = judge(nights, Settings())
    assert (v.verdict, v.rule, v.changed_at, v.window.change) == (
        "regressed",
        "window",
        3,
        pytest.approx(-0.7),
    )
    assert judge(nights, Settings(rule="change_point", alpha=0.01)).rule == "change_point"


NOISE = np.array(
    [0.02, -0.015, 0.01, -0.025, 0.015, 0.0, -0.01, 0.02, -0.02, 0.005, 0.012, -0.008]
)  # CV 1.5%


def noisy(n: int, shift: float, at: int, component: str) -> Nights:
    """n nights with NOISE on step time, `component` (acceptance / step_time) costing `shift` from `at` on."""
    step = STEP_MS / (1.0 + np.resize(NOISE, n))
    accept = np.full(n, ACCEPT)
    if component == "acceptance":
        accept[at:] *= shift
    else:
        step[at:] /= shift
    return cell(list(accept), list(step))


def test_two_nights_5pct_lower_regress_by_the_recent_drop_rule_before_a_change_point_stands() -> None:
    nights = noisy(14, 0.95, 12, "step_time")
    v = judge(nights, Settings())
    assert (v.verdict, v.rule, v.changed_at, v.component) == ("regressed", "recent_drop", 12, "step_time")
    assert v.nights_before == 12 and v.tps.ratio == pytest.approx(0.95, abs=0.02)
    # What the change points alone say of these nights (the recent-drop test all but off): nothing yet.
    assert judge(nights, Settings(recent_alpha=1e-12)).verdict == "unchanged"
    # The noise alone, and a 3% drop within it, are no drop.
    assert judge(noisy(14, 1.0, 12, "step_time"), Settings()).verdict == "unchanged"
    assert judge(noisy(14, 0.97, 12, "step_time"), Settings()).verdict == "unchanged"


def test_a_drop_in_a_steady_accept_length_stands_out_of_the_step_time_noise() -> None:
    # The same tok/s noise, all of it in step time; accept length steady, as with greedy decoding.
    v = judge(noisy(14, 0.95, 12, "acceptance"), Settings())
    assert (v.verdict, v.rule, v.changed_at, v.component) == ("regressed", "recent_drop", 12, "acceptance")
    # A 3% drop, lost in tok/s's noise when that is all there is to test, is plain in accept length.
    nights = noisy(14, 0.97, 12, "acceptance")
    assert recent_drop({"tps": np.log(nights.tps)}, 0, Settings()) is None
    v = judge(nights, Settings())
    assert (v.verdict, v.rule, v.changed_at, v.component) == ("regressed", "recent_drop", 12, "acceptance")
    assert judge(noisy(14, 1.0, 12, "acceptance"), Settings()).verdict == "unchanged"


def test_a_factor_that_carries_under_half_of_the_drop_does_not_decide() -> None:
    # Accept length 0.5% lower on the last two nights (certain: it never moved before), tok/s 2.5%
    # lower mostly through step-time noise: the acceptance test alone would say p ~ 0.
    accept = [ACCEPT] * 12 + [ACCEPT * 0.995] * 2
    step = list(STEP_MS / (1.0 + NOISE)) + [STEP_MS * 1.02] * 2
    nights = cell(accept, step)
    assert 1.0 - nights.tps[-2:].mean() / nights.tps[:-2].mean() > Settings().min_change
    assert ttest(np.log(nights.accept[:-2]), np.log(nights.accept[-2:])).p_value < 1e-12
    assert judge(nights, Settings()).verdict == "unchanged"
    assert judge(cell([ACCEPT] * 12 + [ACCEPT * 0.975] * 2, step), Settings()).verdict == "regressed"


def test_the_recent_drop_starts_at_the_older_night_only_when_it_is_nearer_the_new_level() -> None:
    base = np.log(100.0 * (1.0 + NOISE))
    s = Settings()

    def tps(*last: float) -> dict[str, np.ndarray]:
        return {"tps": np.append(base, np.log(last))}

    assert recent_drop(tps(91.0, 90.0), 0, s) == 12
    assert recent_drop(tps(99.0, 85.0), 0, s) == 13
    assert recent_drop(tps(103.0, 99.0), 0, s) is None  # no drop
    assert recent_drop(tps(91.0, 90.0), 10, s) is None  # too few nights before


def test_a_fleet_that_agrees_on_its_noise_lets_a_smaller_drop_through_on_its_second_night() -> None:
    base = np.log(100.0 * (1.0 + NOISE))
    series = {"tps": np.append(base, np.log([97.0, 96.5]))}
    s = Settings()
    assert recent_drop(series, 0, s) is None  # the cell's own 12 nights: not yet
    shared = Prior(float(np.var(base, ddof=1)), 400.0, 40)  # as noisy as this cell, known well
    assert recent_drop(series, 0, s, {"tps": shared}) == 12
    assert recent_drop(series, 0, s, {"tps": Prior(0.03**2, 400.0, 40)}) is None  # a noisier fleet: no
    # Through judge, a cell without speculation (tok/s is all there is to test): the verdict and
    # the night it names.
    tps = np.exp(series["tps"])
    nights = Nights(tps, np.full(14, np.nan), np.full(14, np.nan), 1000.0 / tps, np.ones(14, dtype=bool))
    assert judge(nights, s).verdict == "unchanged"
    v = judge(nights, s, {"tps": shared})
    assert (v.verdict, v.rule, v.changed_at, v.component) == ("regressed", "recent_drop", 12, "step_time")


def test_three_nights_at_a_new_level_count_where_two_are_not_enough() -> None:
    base = np.log(100.0 * (1.0 + NOISE))
    s = Settings()
    assert recent_drop({"tps": np.append(base, np.log([97.5, 97.2]))}, 0, s) is None
    assert recent_drop({"tps": np.append(base, np.log([97.5, 97.2, 97.0]))}, 0, s) == 12
