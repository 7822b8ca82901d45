"""The estimate's arithmetic (analysis.sweep.estimate): what a level sends and for how long, where
the rates come from, and the parts of a launch read from an earlier sweep's facts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.sweep import estimate as est

CHAT = est.Level("chat", 1, units=80, turns=2.0, tokens=96)
ALL = est.Measure(
    repeats=3, warmup=1, requests=None, duration_s=None, ci_pct=0.0, min_requests=8, budget_s=None
)
# A level's budget is shared by its repeats: 180 s over 3 gives each repeat 60 s.
STOP = est.Measure(
    repeats=3, warmup=1, requests=None, duration_s=None, ci_pct=3.0, min_requests=8, budget_s=180.0
)


def test_the_requests_a_level_needs_grow_with_the_square_of_its_spread() -> None:
    # t(0.975, n - 1) x cv / sqrt(n) <= 3%: a 5% spread needs 14 (2.160 x 5% / sqrt(14) = 2.89%; 13
    # give 3.02%), 10% needs 46, none the 2 an interval needs.
    assert [est.requests_to_settle(cv, 3.0) for cv in (0.0, 0.05, 0.10)] == [2, 14, 46]


def test_a_level_that_sends_every_record_takes_records_turns_and_tokens_over_its_rate() -> None:
    assert est.level_seconds(CHAT, ALL, tps=48.0, cv=0.3) == 80 * 2 * 96 / 48
    given = est.Measure(3, 1, requests=10, duration_s=None, ci_pct=3.0, min_requests=8, budget_s=60.0)
    assert est.level_seconds(CHAT, given, tps=48.0, cv=0.3) == 10 * 2 * 96 / 48  # bench_requests: exactly
    timed = est.Measure(3, 1, requests=None, duration_s=30.0, ci_pct=3.0, min_requests=8, budget_s=60.0)
    assert est.level_seconds(CHAT, timed, tps=48.0, cv=0.3) == 30 + 2 * 96 / 48  # and the last unit's drain


def test_a_stopping_level_sends_what_its_spread_needs_within_its_minimum_and_budget() -> None:
    # Spread 5%: 14 units of 4 s each; spread 0: the minimum, 8; spread 30%: the 60 s budget + a unit.
    assert est.level_seconds(CHAT, STOP, tps=48.0, cv=0.05) == 14 * 4
    assert est.level_seconds(CHAT, STOP, tps=48.0, cv=0.0) == 8 * 4
    assert est.level_seconds(CHAT, STOP, tps=48.0, cv=0.3) == 60 + 4
    # The default 60 s per level: 20 s per repeat (+ the unit in flight).
    default = est.Measure(3, 1, requests=None, duration_s=None, ci_pct=3.0, min_requests=8, budget_s=60.0)
    assert est.level_seconds(CHAT, default, tps=48.0, cv=0.3) == 20 + 4
    # At c = 16 the window needs 2 x c, and c - 1 ramp units are not counted.
    wide = est.Level("chat", 16, units=80, turns=2.0, tokens=96)
    assert est.level_seconds(wide, STOP, tps=480.0, cv=0.0) == 32 * 2 * 96 / 480
    assert est.level_seconds(wide, STOP, tps=480.0, cv=0.05) == 32 * 2 * 96 / 480  # 14 + 15 < 32


def test_an_open_loop_level_is_paced_by_its_arrivals() -> None:
    slow = est.Measure(
        3, 1, requests=20, duration_s=None, ci_pct=0.0, min_requests=8, budget_s=None, rate=0.5
    )
    assert est.level_seconds(CHAT, slow, tps=480.0, cv=0.0) == 20 / 0.5


def test_rates_come_from_the_level_else_its_neighbours_else_an_assumption_named() -> None:
    h = est.History(tps={("code", 1): 40.0, ("chat", 1): 30.0, ("code", 4): 80.0})
    assert est.level_rate(h, "llama_cpp", "chat", 1) == (30.0, None)
    assert est.level_rate(h, "llama_cpp", "chat", 4) == (80.0, "chat at c=4 as the other workloads")
    assert est.level_rate(h, "llama_cpp", "code", 16) == (80.0 * 2, "c=16 from c=4")  # x (16/4) ** 0.5
    assert est.level_rate(est.History(), "sglang", None, 4) == (90.0 * 2, "90 tok/s at c=1")


def test_a_rate_measured_at_other_tokens_per_request_is_taken_to_this_sweeps() -> None:
    # History at 8 tokens: a 1 s first token, then 40 ms a token: 8 / 1.28 s = 6.25 tok/s. At 96
    # tokens the same server makes 96 / (1 + 95 x 0.04) = 20 tok/s, not 6.25 (the review sweep's
    # max_tokens=8 made the next 96-token sweep's estimate 147 s of benchmark a launch; it took 79).
    h = est.History(tps={(None, 1): 6.25}, tokens={(None, 1): 8.0}, first_steps={(None, 1): 1 / 0.04})
    rate, why = est.level_rate(h, "llama_cpp", None, 1, tokens=96)
    assert rate == pytest.approx(20.0) and why == "96 tokens a request from history's 8"
    assert est.level_rate(h, "llama_cpp", None, 1, tokens=8) == (6.25, None)
    assert est.level_rate(est.History(tps={(None, 1): 6.25}), "llama_cpp", None, 1, tokens=96) == (6.25, None)
    # Another level's rate and other tokens: both scalings, both said.
    rate, why = est.level_rate(h, "llama_cpp", None, 4, tokens=96)
    assert rate == pytest.approx(40.0) and why == "c=4 from c=1; 96 tokens a request from history's 8"


def test_the_parts_name_every_assumption_and_add_up() -> None:
    h = est.History(
        load_s=10.0, overhead_s=5.0, setup_s=20.0, tps={("chat", 1): 48.0}, cv={("chat", 1): 0.05}
    )
    p = est.parts(h, "llama_cpp", [CHAT], STOP, launches=4, health_timeout_s=600)
    assert p.assumptions == ()
    assert p.bench_s == 3 * 14 * 4 + 1 * 2 * 96 / 48  # 3 repeats and the warm-up
    assert p.total_s == 20 + 4 * (10 + 5 + p.bench_s)
    bare = est.parts(est.History(), "llama_cpp", [CHAT], STOP, launches=1, health_timeout_s=600)
    assert bare.load_s == 10 and "load 10 s" in bare.assumptions  # the engine's own guess
    # SGLang has no guess: up to the health timeout; nor does a guess above the timeout hold.
    bare = est.parts(est.History(), "sglang", [CHAT], STOP, launches=1, health_timeout_s=600)
    assert bare.load_s == 600 and "load up to the health timeout, 600 s" in bare.assumptions
    bare = est.parts(est.History(), "llama_cpp", [CHAT], STOP, launches=1, health_timeout_s=5)
    assert bare.load_s == 5 and "load up to the health timeout, 5 s" in bare.assumptions


def test_a_long_sweep_names_its_biggest_lever() -> None:
    loading = est.Parts(launches=10, setup_s=0, load_s=750, overhead_s=0, bench_s=250, assumptions=())
    assert est.lever(loading, STOP).startswith("loading is 75% of it: fewer launches")
    benching = est.Parts(launches=10, setup_s=0, load_s=10, overhead_s=0, bench_s=990, assumptions=())
    counted = est.Measure(3, 1, requests=10, duration_s=None, ci_pct=None, min_requests=8, budget_s=None)
    assert "drop bench_requests" in est.lever(benching, counted)
    assert "drop bench_ci_pct=0" in est.lever(benching, ALL)
    assert "fewer repeats, levels or workloads" in est.lever(benching, STOP)


def _fact(folder: Path, name: str, started: float, load: float, bench: float, runs: list) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    timings = {
        "started_at": started,
        "finished_at": started + load + bench + 1,
        "load_s": load,
        "bench_s": bench,
    }
    fact = {"status": "ok", "host": "h0", "engine": {"name": "llama_cpp", "model": "/m.gguf"},
            "timings": timings, "runs": runs}  # fmt: skip
    (folder / f"{name}.json").write_text(json.dumps(fact))


def test_the_history_reads_loads_the_suites_own_time_setup_rates_and_spread(tmp_path: Path) -> None:
    sweep = tmp_path / "sw"
    requests = [{"output_tokens": 96, "e2e_s": 96 / r, "ttft_s": 0.2 * 96 / r} for r in (40.0, 50.0, 60.0)]
    run = {"concurrency": 1, "workload": "code", "duration_s": 10.0, "window_output_tokens": 500.0,
           "requests": requests}  # fmt: skip
    # Launches at 100, 150, 210: the suite's own time is what load and benchmark leave of each gap.
    _fact(sweep / "h0", "a", 100.0, 4.0, 40.0, [run])
    _fact(sweep / "h0", "b", 150.0, 6.0, 44.0, [run])
    _fact(sweep / "h0", "c", 210.0, 5.0, 30.0, [run])
    (sweep / "sweep.json").write_text(json.dumps({"run_started_at": 70.0}))
    h = est.history(tmp_path, "llama_cpp", "/m.gguf")
    assert (h.load_s, h.overhead_s, h.setup_s) == (5.0, 8.0, 30.0)  # the suite's: 6 and 10
    assert h.tps == {("code", 1): 50.0}
    assert h.cv[("code", 1)] == pytest.approx(0.2)
    # The shape of its requests: 96 tokens, the first a fifth of each: 0.2 / (0.8 / 95) decode steps.
    assert h.tokens == {("code", 1): 96.0}
    assert h.first_steps[("code", 1)] == pytest.approx(0.2 / (0.8 / 95))
    assert est.history(tmp_path, "sglang", "/m.gguf").load_s is None
