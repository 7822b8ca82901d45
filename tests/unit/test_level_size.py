"""How long each level measures on a host (analysis.sweep.levelsize): the interval rule, or what a
launch is worth (Kalibera and Jones) where the host's history knows its launch spread and load; the
client's rule (specsweep_bench.py), the estimate's and the plan's."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest
from test_bench_client import bench
from test_bench_stop import units_at
from test_launch_prior import gemma_sweep, known
from test_sweep_plan import IDENTITY, ONE_LAUNCH_EACH, earlier_sweep, llama

from analysis.running import prior
from analysis.sweep import estimate as est
from analysis.sweep import levelsize, plan, request
from analysis.sweep.launchprior import ASSUMED, LaunchPrior

# --------------------------------------------------------------------------------------
# The rule a host gets
# --------------------------------------------------------------------------------------


def test_a_host_whose_history_knows_its_launches_measures_what_a_launch_is_worth() -> None:
    rule = levelsize.sizing(None, None, known(0.5), 750.0)
    assert (rule.ci_pct, rule.launch_cost_s, rule.launch_cv_pct) == (None, 750.0, 0.5)
    assert rule.budget_s == 750.0  # a level is never cut short of what a relaunch costs
    # A cheap launch keeps the default budget; the operator's budget is kept either way.
    assert levelsize.sizing(None, None, known(18.0), 5.0).budget_s == levelsize.DEFAULT_BUDGET_S
    assert levelsize.sizing(None, 120.0, known(0.5), 750.0).budget_s == 120.0


@pytest.mark.parametrize(
    ("ci_pct", "prior", "cost"),
    [(3.0, known(0.5), 750.0), (None, ASSUMED, 750.0), (None, known(0.5), None), (0.0, known(0.5), 750.0)],
)
def test_the_interval_rule_where_asked_for_or_the_history_lacks_the_spread_or_the_load(
    ci_pct: float | None, prior: LaunchPrior, cost: float | None
) -> None:
    rule = levelsize.sizing(ci_pct, None, prior, cost)
    expected = levelsize.DEFAULT_CI_PCT if ci_pct is None else ci_pct
    assert (rule.ci_pct, rule.budget_s, rule.launch_cost_s) == (expected, levelsize.DEFAULT_BUDGET_S, None)


# --------------------------------------------------------------------------------------
# The arithmetic: client and estimate alike
# --------------------------------------------------------------------------------------


def test_a_level_worth_more_requests_where_launches_cost_more_and_vary_less() -> None:
    # The seed case at c = 1: a 750 s launch, 1.08 s a request, requests 5% apart, launches 0.5%.
    seed = est.worth_sending(750.0, 1.08, 0.05, 0.5)
    assert seed == pytest.approx(math.sqrt(750.0 / 1.08) * 10, rel=1e-9)  # 263 requests
    # This machine: a 5 s launch, 5 s a request, launches 18% apart: under one request.
    assert est.worth_sending(5.0, 5.0, 0.10, 18.0) < 1
    assert est.worth_sending(750.0, 1.08, 0.05, 2.0) == pytest.approx(seed / 4)


def test_the_client_stops_a_repeat_at_its_share_of_what_the_launch_is_worth() -> None:
    # Units a second apart, spread 20% (alternating 80 and 120 tok/s), a 400 s launch 2% apart, 2
    # repeats: sqrt(400 / 1) x 0.2 / 0.02 / 2 = 100 units a repeat, by the estimate's formula too.
    launch = bench.LaunchCost(cost_s=400.0, cv=0.02, repeats=2)
    stop = bench.Stop(ci_pct=3.0, min_requests=8, budget_s=None, launch=launch)
    rates = [80.0, 120.0] * 60
    done = units_at(rates)
    cv = statistics.stdev(rates[:99]) / statistics.mean(rates[:99])
    worth = bench.worth_sending(launch, 1.0, cv)
    assert worth == pytest.approx(est.worth_sending(400.0, 1.0, cv, 2.0) / 2)
    assert 99 < worth < 101
    assert not bench.enough(stop, 1, 99.0, sent=99, done=done[:99])
    assert bench.enough(stop, 1, 101.0, sent=101, done=done[:101])
    # The interval rule would go on (t x 20% / sqrt(n) <= 3% needs about 175); launches 40% apart are
    # worth 5 units a repeat: the minimum, 8, decides.
    assert not bench.settled(rates[:101], 3.0)
    loose = bench.Stop(ci_pct=3.0, min_requests=8, budget_s=None, launch=bench.LaunchCost(400.0, 0.4, 2))
    assert not bench.enough(loose, 1, 7.0, sent=7, done=done[:7])
    assert bench.enough(loose, 1, 8.0, sent=8, done=done[:8])


def test_the_estimate_sends_what_the_launch_is_worth_within_the_minimum_and_the_budget() -> None:
    level = est.Level("code", 1, units=1000, turns=1.0, tokens=96)
    worth = est.Measure(3, 1, None, None, None, 8, 750.0, launch_cost_s=750.0, launch_cv_pct=0.5)
    # 96 tokens at 88.8 tok/s: 1.08 s a unit; sqrt(750 / 1.08) x 5% / 0.5% / 3 repeats = 88 a repeat.
    per_unit = 96 / 88.8
    units = math.ceil(est.worth_sending(750.0, per_unit, 0.05, 0.5) / 3)
    assert worth.units(level, per_unit, 0.05) == units == 88
    assert est.level_seconds(level, worth, 88.8, 0.05) == pytest.approx(units * per_unit)
    # Launches 20% apart: the minimum; bench_ci_pct=0: every unit, no budget.
    spread = est.Measure(3, 1, None, None, None, 8, 60.0, launch_cost_s=750.0, launch_cv_pct=20.0)
    assert spread.units(level, per_unit, 0.05) == 8
    everything = est.Measure(3, 1, None, None, 0.0, 8, 60.0)
    assert not everything.stops and est.level_seconds(level, everything, 88.8, 0.05) == 1000 * per_unit


def test_a_count_of_zero_percent_sends_every_unit_and_records_no_rule() -> None:
    args = bench.parse_args(["--engine", "llama_cpp", "--url", "http://127.0.0.1:1", "--prompts", "p",
                             "--max-tokens", "8", "--ci-pct", "0"])  # fmt: skip
    assert bench.stopping(args) is None
    assert set(bench.stop_settings(None, 60.0).values()) == {None}
    both = ["--engine", "llama_cpp", "--url", "http://x:1", "--prompts", "p", "--max-tokens", "8",
            "--launch-cost-s", "750"]  # fmt: skip
    with pytest.raises(SystemExit):
        bench.parse_args(both)  # the cost without the spread
    ruled = bench.stopping(bench.parse_args([*both, "--launch-cv-pct", "0.5", "--repeats", "3"]))
    assert ruled is not None and ruled.launch == bench.LaunchCost(750.0, 0.005, 3)
    assert bench.stop_settings(ruled, 750.0) == {"ci_pct": None, "min_requests": 8, "level_budget_s": 750.0,
                                                 "launch_cost_s": 750.0, "launch_cv_pct": 0.5}  # fmt: skip


# --------------------------------------------------------------------------------------
# The plan: each host's argv and words
# --------------------------------------------------------------------------------------


def test_the_plan_gives_a_host_with_history_the_launch_rule_and_says_so(tmp_path: Path) -> None:
    results = tmp_path / "r"
    gemma_sweep(results)  # the baseline launched twice: a launch spread on h0
    earlier_sweep(results, "loads", 1000, [("llama_cpp", 40.0, 100.0, "ok")])  # a 40 s load

    def history(host: str, engine: str, model: str | None) -> LaunchPrior:
        return prior.from_history(results, host, engine, model, IDENTITY.sweep_id)

    def planned(**given: str) -> dict:
        built = plan.build(request.read({**ONE_LAUNCH_EACH, "steps": "1", "finalists": "true", **given}),
                           {"h0": llama()}, IDENTITY, results, history)  # fmt: skip
        assert built["errors"] == [], built["errors"]
        return built

    built = planned()
    rule = built["hosts"]["h0"]["stopping"]
    spread = built["hosts"]["h0"]["launch_prior"]["cv_pct"]
    cost = est.history(results, "llama_cpp", "/models/gemma.gguf").launch_s
    assert cost is not None and cost >= 40.0
    assert rule == {"ci_pct": None, "budget_s": max(60.0, round(cost, 1)), "launch_cost_s": round(cost, 1),
                    "launch_cv_pct": round(spread, 3)}  # fmt: skip
    argv = built["hosts"]["h0"]["benchmark"]["argv"]
    assert f"--launch-cost-s={round(cost, 1)}" in argv and f"--launch-cv-pct={round(spread, 3)}" in argv
    assert not any(a.startswith("--ci-pct") for a in argv)
    assert "each level measures what a launch is worth" in plan.headline(built["sweep"], built["hosts"])
    # The operator's interval wins, and its words go.
    asked = planned(bench_ci_pct="2")
    assert "--ci-pct=2.0" in asked["hosts"]["h0"]["benchmark"]["argv"]
    assert "what a launch is worth" not in plan.headline(asked["sweep"], asked["hosts"])


def test_a_plan_only_folder_takes_no_place_among_the_sweeps_history_reads(tmp_path: Path) -> None:
    gemma_sweep(tmp_path)
    before = prior.from_history(tmp_path, "h0", "llama_cpp", "/models/gemma.gguf", "now")
    assert before.from_history
    for i in range(prior.SWEEPS_READ + 1):  # newer folders with a plan and no fact
        (tmp_path / f"plan{i}" / "h0").mkdir(parents=True)
        (tmp_path / f"plan{i}" / "sweep.json").write_text("{}")
    assert prior.from_history(tmp_path, "h0", "llama_cpp", "/models/gemma.gguf", "now") == before
    assert est.history(tmp_path, "llama_cpp", "/models/gemma.gguf").cv  # the estimate's history too
