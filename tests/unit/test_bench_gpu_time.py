"""bench/gpu_time.py prices the seed case per strategy with the sweep's own level arithmetic: the
launch counts and GPU hours it prints are what its inputs say (few trials: coverage means little)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from analysis.sweep import estimate

BENCH = Path(__file__).resolve().parents[2] / "bench" / "gpu_time.py"


def test_the_seed_cases_benchmark_is_priced_by_the_sweeps_level_arithmetic() -> None:
    sys.path.insert(0, str(BENCH.parent))
    import gpu_time  # bench/ is not a package: imported once the path is known

    full, _ = gpu_time.bench_s(stopping=False)
    # Every record at c = 1: chat 80 x 2 turns, code 164, 96 tokens at 88.8 tok/s, 3 repeats.
    at_1 = 3 * (80 * 2 + 164) * 96 / 88.8
    assert full > at_1
    short, requests = gpu_time.bench_s(stopping=True)
    assert short < full / 4 and requests[1] < 3 * (80 * 2 + 164)
    level = estimate.Level(None, 1, 80, 2.0, 96)
    unit = 2 * 96 / 88.8  # a two-turn chat record's seconds
    settle = estimate.requests_to_settle(0.05, 3.0) * unit
    # The level's 60 s budget shared by its 3 repeats, and the unit in flight, end a repeat first.
    assert settle > 60 / 3 + unit
    assert estimate.level_seconds(level, gpu_time.measure(), 88.8, 0.05) == pytest.approx(60 / 3 + unit)


def test_the_sweeps_rows_are_the_sweeps_own_rule() -> None:
    # On a host whose history knows a 2% launch spread: main's rule always launched the baseline
    # again (7 or more); the new one makes no baseline-again launch and relaunches a close call
    # only where one more launch could resolve it, so most trials make the 6 launches of the grid.
    sys.path.insert(0, str(BENCH.parent))
    import gpu_time

    t = gpu_time.truth()
    rng = np.random.default_rng(3)
    old = [gpu_time.sweep(rng, t, 0.02, new=False)[0] for _ in range(8)]
    new = [gpu_time.sweep(rng, t, 0.02, new=True)[0] for _ in range(8)]
    assert min(old) >= 7, old
    assert min(new) == 6 and sum(new) < sum(old), (new, old)
    n, spent, chosen = gpu_time.sweep(rng, t, 0.005, new=True)
    assert list(chosen.index) == [1, 16, 64] and set(chosen) <= set(t.index)
    # Each launch's benchmark is counted, a finalist's relaunch only at its close calls' levels.
    full, _ = gpu_time.bench_s(True)
    assert 6 * full - 1e-6 <= spent <= n * full + 1e-6, (n, spent, full)


def test_a_finalists_relaunch_is_priced_at_its_close_calls_levels_only() -> None:
    # At a 0.5% spread the close calls are single levels (c = 16: s2 and s3 1.1% apart): the trials
    # that relaunch spend less benchmark than whole launches would.
    sys.path.insert(0, str(BENCH.parent))
    import gpu_time

    t, rng = gpu_time.truth(), np.random.default_rng(5)
    m = gpu_time.measure(launch_sd=0.005)
    full, _ = gpu_time.bench_s(True, m)
    per_level, _ = gpu_time.bench_levels(True, m)
    assert sum(per_level.values()) == pytest.approx(full)
    trials = [gpu_time.sweep(rng, t, 0.005, new=True, m=m)[:2] for _ in range(12)]
    relaunched = [(n, spent) for n, spent in trials if n > 6]
    assert relaunched, trials
    assert all(spent < n * full - 1e-6 for n, spent in relaunched), (relaunched, full)


def test_the_bench_prints_each_strategy_at_each_launch_spread() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--trials", "3"], capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert len(rows) == 3 * 5, done.stdout
    hand = [r for r in rows if r[1] == "hand"]
    assert all(r[-4] == "6.0" for r in hand), done.stdout  # the hand loop's 6 launches, every trial
    # Without finalists each config is launched once: the grid's 6 (no baseline-again launch either,
    # where the host's history knows its spread).
    single = [r for r in rows if r[1:3] == ["one", "launch"]]
    assert len(single) == 3 and all(r[-4] == "6.0" for r in single), done.stdout


def test_the_sweep_rows_price_the_levels_the_bench_is_given() -> None:
    # Tighter levels (2% within 120 s) measure more requests at c = 1, where 3% within 60 s stops at
    # its budget, and cost more benchmark a launch; the header says which levels were priced.
    sys.path.insert(0, str(BENCH.parent))
    import gpu_time

    short, requests = gpu_time.bench_s(True)
    tight, more = gpu_time.bench_s(True, gpu_time.measure(2.0, 120.0))
    assert tight > short and more[1] > requests[1]
    argv = [sys.executable, str(BENCH), "--trials", "1", "--launch-sd", "0.02", "--ci-pct", "2",
            "--level-budget-s", "120"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    said = f"levels stop at a 2% interval within 120 s: {tight / 60:.1f} min per launch"
    assert said in done.stdout, done.stdout
    # By default the plan's rule on a host whose history knows its spread: what a launch is worth,
    # within the launch's cost; at 2% more than 3% within 60 s measures, at 0.5% more still.
    worth, sent = gpu_time.bench_s(True, gpu_time.measure(None, None, 0.02))
    steadier, _ = gpu_time.bench_s(True, gpu_time.measure(None, None, 0.005))
    assert sent[1] > requests[1] and steadier > worth > short
    done = subprocess.run(argv[:6], capture_output=True, text=True, timeout=300, check=False)
    said = f"levels stop at what a launch is worth (750 s, 2%) within 750 s: {worth / 60:.1f} min per launch"
    assert said in done.stdout, done.stdout
