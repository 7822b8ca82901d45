"""The fleet's noise prior (analysis.nightly.noise): the polygamma functions, the fit, moderation,
and what the summary and the JSON say of it."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analysis.nightly import noise
from analysis.nightly.changepoint import t_two_sided_p, ttest
from analysis.nightly.judge import HARMFUL, Nights, fleet_noise
from analysis.nightly.recommendations import CHANGES
from analysis.nightly.regress_report import Night, markdown, to_json
from analysis.nightly.settings import Settings
from analysis.nightly.verdicts import COLUMNS

EULER = 0.5772156649015329
ZETA3 = 1.2020569031595942


def test_polygamma_functions_match_their_closed_forms() -> None:
    x = np.array([1.0, 0.5, 2.0, 10.5])
    assert noise.digamma(x) == pytest.approx(
        [
            -EULER,
            -EULER - 2 * math.log(2),
            1 - EULER,
            -EULER - 2 * math.log(2) + sum(2 / (2 * k + 1) for k in range(10)),
        ],
        rel=1e-7,
    )
    assert noise.trigamma(x[:3]) == pytest.approx(
        [math.pi**2 / 6, math.pi**2 / 2, math.pi**2 / 6 - 1], rel=1e-9
    )
    assert noise.tetragamma(x[:3]) == pytest.approx([-2 * ZETA3, -14 * ZETA3, -2 * ZETA3 + 2], rel=1e-7)


@pytest.mark.parametrize("y", [1e-4, 0.05, 0.7, 3.0, 400.0])
def test_trigamma_inverse_inverts(y: float) -> None:
    assert float(noise.trigamma(np.array([noise.trigamma_inverse(y)]))[0]) == pytest.approx(y, rel=1e-7)


def draws(sigma: np.ndarray, df: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Sample variances on df degrees of freedom of cells whose true sd is sigma."""
    return sigma**2 * rng.chisquare(df) / df


def test_cells_of_one_noise_level_share_it_as_if_known() -> None:
    rng = np.random.default_rng(0)
    df = rng.integers(3, 25, 300).astype(float)
    prior = noise.fit(draws(np.full(300, 0.02), df, rng), df)
    assert math.sqrt(prior.s2) == pytest.approx(0.02, rel=0.05)
    assert prior.df > 100 and prior.cells == 300


def test_cells_that_disagree_keep_most_of_their_own_noise() -> None:
    rng = np.random.default_rng(1)
    df = rng.integers(3, 25, 300).astype(float)
    prior = noise.fit(draws(rng.choice([0.01, 0.02, 0.03], 300), df, rng), df)
    assert prior.df < 10


def test_the_prior_degrees_of_freedom_are_recovered() -> None:
    # True variances drawn from the model's own prior: s0^2 = 0.02^2 on d0 = 10.
    rng = np.random.default_rng(2)
    sigma = np.sqrt(0.02**2 * 10 / rng.chisquare(10, 3000))
    df = rng.integers(3, 25, 3000).astype(float)
    prior = noise.fit(draws(sigma, df, rng), df)
    assert 7 < prior.df < 14 and math.sqrt(prior.s2) == pytest.approx(0.02, rel=0.05)


def test_too_few_cells_or_none_with_a_variance_give_no_prior() -> None:
    assert noise.fit(np.array([1e-4, 2e-4]), np.array([10.0, 10.0])) is noise.NO_PRIOR
    assert noise.fit(np.array([1e-4, 2e-4, np.nan, 0.0]), np.array([10.0, 10.0, 0.0, 5.0])) is noise.NO_PRIOR


def test_a_handful_of_cells_that_agree_by_luck_are_worth_no_more_than_their_nights() -> None:
    # Closer together than chi-square draws on 6 degrees of freedom ever come: limma's d0 would be
    # infinite, as if the noise were known.
    prior = noise.fit(np.array([4e-4, 4.01e-4, 3.99e-4]), np.array([6.0, 6.0, 6.0]))
    assert prior.df == 18.0 and prior.s2 == pytest.approx(4e-4, rel=0.15)


def test_moderation_weighs_the_prior_by_its_degrees_of_freedom() -> None:
    assert noise.Prior(4e-4, 10.0, 5).moderate(1e-4, 5.0) == pytest.approx((3e-4, 15.0))
    assert noise.NO_PRIOR.moderate(1e-4, 5.0) == (1e-4, 5.0)


def test_a_moderated_t_test_uses_the_fleet_noise_and_degrees_of_freedom() -> None:
    before, after = np.array([0.0, 0.01, -0.01, 0.0]), np.array([-0.05])
    own = ttest(before, after)
    test = ttest(before, after, noise.Prior(0.02**2, 1000.0, 9))
    s2 = (1000.0 * 0.02**2 + 3 * 2e-4 / 3) / 1003.0  # the cell's own: 2e-4 of squares on 3 df
    t = 0.05 / math.sqrt(s2 * (1 / 4 + 1))
    assert test.p_value == pytest.approx(t_two_sided_p(t, 1003.0), rel=1e-9)
    # Near the normal's on 1003 degrees of freedom; weaker than the cell's own test, whose four
    # nights happen to be steadier than the fleet.
    assert test.p_value == pytest.approx(math.erfc(t / math.sqrt(2)), rel=0.02) and test.p_value > own.p_value
    # A cell with a single night on each side has no spread of its own: the fleet's alone.
    alone = ttest(np.array([0.0]), np.array([-0.05]), noise.Prior(0.02**2, 50.0, 9))
    assert alone.p_value == pytest.approx(t_two_sided_p(0.05 / (0.02 * math.sqrt(2)), 50.0), rel=1e-9)


SHARED = (
    "shared the night-to-night noise of the cells judged with it: tok/s CV 1.8% (12 cells, worth 240"
    " nights), accept length CV 0.9% (10 cells, worth 200 nights)."
)
NONE = {"cells": 0, "cv_pct": None, "df": 0.0}


@pytest.mark.parametrize(
    ("priors", "s", "said", "shared"),
    [
        (
            {"tps": noise.Prior(0.018**2, 240.0, 12), "accept": noise.Prior(0.009**2, 200.0, 10)},
            Settings(),
            SHARED,
            {"tps": {"cells": 12, "cv_pct": pytest.approx(1.8), "df": 240.0},
             "accept": {"cells": 10, "cv_pct": pytest.approx(0.9), "df": 200.0}, "step": NONE},
        ),
        ({}, Settings(), "used each cell's own noise (fewer than 3 cells", dict.fromkeys(HARMFUL, NONE)),
        ({}, Settings(noise="own"), "used each cell's own noise (noise: own)", dict.fromkeys(HARMFUL, NONE)),
    ],
)  # fmt: skip
def test_the_summary_and_the_json_say_what_noise_was_shared(
    priors: dict[str, noise.Prior], s: Settings, said: str, shared: dict[str, object]
) -> None:
    night = Night(pd.DataFrame(columns=COLUMNS), "n1", s, pd.DataFrame(columns=CHANGES), priors)
    assert said in markdown(night)
    assert to_json(night)["noise"] == shared


def test_noise_own_shares_nothing() -> None:
    rng = np.random.default_rng(3)
    cells = [
        Nights(tps, np.full(20, np.nan), np.full(20, np.nan), 1000.0 / tps, np.ones(20, dtype=bool))
        for tps in 100.0 * np.exp(rng.normal(0.0, 0.02, (10, 20)))
    ]
    shared = fleet_noise(cells, Settings())
    assert shared["tps"].cells == 10 and math.sqrt(shared["tps"].s2) == pytest.approx(0.02, rel=0.2)
    # Without speculation there are no factors to share a noise of.
    assert not shared["accept"].given and not shared["step"].given
    assert fleet_noise(cells, Settings(noise="own")) == {}


def test_speculative_cells_share_the_noise_of_each_factor_of_tok_s() -> None:
    rng = np.random.default_rng(4)
    accept = 2.5 * np.exp(rng.normal(0.0, 0.01, (10, 20)))
    step = 20.0 * np.exp(rng.normal(0.0, 0.015, (10, 20)))
    tps = accept / step * 1000.0
    cells = [Nights(t, a, np.full(20, np.nan), a / t * 1000.0, np.ones(20, dtype=bool))
             for t, a in zip(tps, accept, strict=True)]  # fmt: skip
    shared = fleet_noise(cells, Settings())
    cv = {name: math.sqrt(prior.s2) for name, prior in shared.items()}
    assert cv == pytest.approx({"tps": math.hypot(0.01, 0.015), "accept": 0.01, "step": 0.015}, rel=0.2)
    assert {prior.cells for prior in shared.values()} == {10}
