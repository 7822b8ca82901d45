"""Levels that stop when they know enough (specsweep_bench.py Stop): the interval rule, the minimum,
the budget, the ramp left out, and `--requests`/`--duration-s` keeping their meaning."""

from __future__ import annotations

import random

import pytest
from test_bench_client import bench
from test_bench_load import unit

RECORDS = [{"id": f"r{i}", "prompt": f"prompt {i}"} for i in range(50)]


def units_at(rates: list[float]) -> list:
    """Finished units, one a second, each generating `rate` tokens over its one second."""
    return [unit(float(i), i + 1.0, tokens=int(r)) for i, r in enumerate(rates)]


def test_the_t_quantile_matches_the_tables() -> None:
    for df, t in ((3, 3.1824), (7, 2.3646), (30, 2.0423), (120, 1.9799)):
        assert bench.t975(df) == pytest.approx(t, rel=0.003)


def test_a_level_is_settled_when_its_interval_is_within_the_percent_asked() -> None:
    assert bench.settled([100.0, 101.0, 99.0, 100.0], 3.0)
    # The same spread over 3 values: t(2) = 4.30 widens it past 3%.
    assert not bench.settled([100.0, 106.0, 94.0], 3.0)
    assert bench.settled([100.0, 106.0, 94.0] * 10, 3.0)  # 30 of them: 1.1%
    assert not bench.settled([100.0] * 10, 0.0)  # 0 turns the rule off


def test_a_stop_waits_for_the_minimum_then_the_interval() -> None:
    stop = bench.Stop(ci_pct=3.0, min_requests=8, budget_s=None)
    steady = units_at([100] * 12)
    assert not bench.enough(stop, 1, 5.0, sent=7, done=steady[:7])  # under the minimum
    assert bench.enough(stop, 1, 5.0, sent=8, done=steady[:8])
    noisy = units_at([100, 60, 140, 80, 120, 50, 150, 100])
    assert not bench.enough(stop, 1, 5.0, sent=8, done=noisy)
    assert not bench.enough(None, 1, 1e9, sent=8, done=steady)  # no rule: the count decides


def test_the_ramp_is_left_out_of_the_interval_and_a_window_is_always_sent() -> None:
    stop = bench.Stop(ci_pct=3.0, min_requests=4, budget_s=None)
    # c = 4: the first 3 units ran with fewer in flight (fast); the rest are steady.
    ramped = units_at([400, 300, 200, *[100] * 6])
    assert bench.enough(stop, 4, 5.0, sent=9, done=ramped)
    # The budget stops a level, but never before 2 x c units were sent.
    budget = bench.Stop(ci_pct=3.0, min_requests=100, budget_s=10.0)
    assert not bench.enough(budget, 4, 11.0, sent=7, done=ramped[:7])
    assert bench.enough(budget, 4, 11.0, sent=8, done=ramped[:8])


def test_a_level_past_its_budget_sends_no_more_and_its_records_are_distinct() -> None:
    seen: list[str] = []

    def work(record: dict) -> list:
        seen.append(record["id"])
        return [({"prompt_id": record["id"], "output_tokens": 4, "ttft_s": 0.0, "e2e_s": 0.01,
                  "decode_tps": None, "itl_s": [], "text": "", "error": None}, None)]  # fmt: skip

    load = bench.Load(2, 50, stop=bench.Stop(ci_pct=0.0, min_requests=1, budget_s=0.0))
    units = bench.drive(work, bench.Sampler(RECORDS, random.Random(1)), load, random.Random(2))
    assert len(units) == 4  # 2 x c: the window's least, out of 50
    assert len(set(seen)) == len(seen)  # drawn without replacement: a fair sample of the set


def test_a_count_or_a_duration_keeps_its_meaning() -> None:
    base = [
        "--engine",
        "llama_cpp",
        "--url",
        "http://127.0.0.1:1",
        "--prompts",
        "p.jsonl",
        "--max-tokens",
        "4",
    ]
    # The level's 60 s are shared by its 3 repeats (the default), and recorded as given.
    stop = bench.stopping(bench.parse_args(base))
    assert stop == bench.Stop(3.0, 8, 20.0)
    assert bench.stop_settings(stop, 60.0)["level_budget_s"] == 60.0
    # Recorded as given, not rebuilt from a repeat's share (0.9 / 3 x 3 is 0.8999...).
    odd = bench.parse_args([*base, "--level-budget-s", "0.9"])
    assert bench.stop_settings(bench.stopping(odd), odd.level_budget_s)["level_budget_s"] == 0.9
    assert bench.stopping(bench.parse_args([*base, "--repeats", "1"])) == bench.Stop(3.0, 8, 60.0)
    assert bench.stopping(bench.parse_args([*base, "--requests", "20"])) is None
    assert bench.stopping(bench.parse_args([*base, "--duration-s", "20"])) is None
    assert bench.stop_settings(None, 60.0) == {"ci_pct": None, "min_requests": None, "level_budget_s": None,
                                               "launch_cost_s": None, "launch_cv_pct": None}  # fmt: skip
