"""The estimate of a CPU engine on a shared host: history's rates taken back to a whole server's
share of the CPU (its runs' interference samples), and scaled to the share the load leaves now."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_sweep_plan import build, llama

from analysis.sweep import estimate as est
from analysis.sweep import plan


def test_a_server_gets_its_threads_until_others_crowd_the_cpus() -> None:
    assert est.free_cores(0.0, 2, 1.0) == 1.0
    assert est.free_cores(1.0, 2, 1.0) == 1.0  # one other: a core each
    assert est.free_cores(3.0, 2, 1.0) == pytest.approx(0.5)  # 4 runnable on 2 cores
    assert est.cpu_share(0.5, 1.0) == 0.5 and est.cpu_share(1.5, 1.0) == 1.0
    assert est.cpu_share(0.0, 1.0) == est.MIN_SHARE


def sweep_with(results: Path, runs: list[tuple[float, float]]) -> None:
    """An earlier llama.cpp sweep on a 2-CPU host: a fact per (tok/s, cores others kept busy)."""
    (results / "old" / "h0").mkdir(parents=True)
    for i, (tps, others) in enumerate(runs):
        run = {"concurrency": 1, "duration_s": 10.0, "window_output_tokens": 10 * tps,
               "interference": {"cpu_other_cores": others}, "requests": []}  # fmt: skip
        fact = {
            "status": "ok", "host": "h0", "engine": {"name": "llama_cpp", "model": "/models/gemma.gguf"},
            "host_facts": {"hostname": "h0", "cpu_count": 2},
            "launch": {"argv": ["llama-server", "-t", "1"], "env": {}},
            "timings": {"started_at": float(i), "finished_at": i + 1.0, "load_s": 2.0, "bench_s": 50.0},
            "runs": [run],
        }  # fmt: skip
        (results / "old" / "h0" / f"s{i}.json").write_text(json.dumps(fact))
    (results / "old" / "sweep.json").write_text("{}")


def test_history_rates_are_taken_back_to_a_whole_servers_share(tmp_path: Path) -> None:
    # 10 tok/s while others held 1.5 of 2 cores (the server had half a core), 20 with a core free.
    sweep_with(tmp_path, [(10.0, 1.5), (20.0, 0.5)])
    h = est.history(tmp_path, "llama_cpp", "/models/gemma.gguf")
    assert h.tps[(None, 1)] == pytest.approx(20.0)
    assert h.free == pytest.approx(0.75)  # the median of 0.5 and 1 (its need)
    # A GPU engine's rates are its own (below): the CPU share does not set them.
    assert est._free({"host_facts": {"cpu_count": 2}}, {"interference": {"cpu_other_cores": 1.5}}) == 0.5


def test_the_benchmark_is_scaled_to_the_share_the_load_leaves_now(tmp_path: Path) -> None:
    sweep_with(tmp_path, [(20.0, 0.5)])
    h = est.history(tmp_path, "llama_cpp", "/models/gemma.gguf")
    levels = [est.Level(None, 1, 4, 1.0, 96)]
    m = est.Measure(3, 1, None, None, 0.0, 8, None)
    quiet = est.parts(h, "llama_cpp", levels, m, 4, 120, (1.0, 1.0))
    crowded = est.parts(h, "llama_cpp", levels, m, 4, 120, (0.5, 1.0))
    assert crowded.bench_s == pytest.approx(2 * quiet.bench_s)
    assert "the server gets 0.50 of its 1 core(s) now; history's runs had 1.00" in crowded.assumptions
    # Unseen load (a remote host): the share the history's runs had, their rate as measured.
    assert est.parts(h, "llama_cpp", levels, m, 4, 120).bench_s == pytest.approx(quiet.bench_s)
    sweep_with(tmp_path / "loaded", [(10.0, 1.5)])
    loaded = est.history(tmp_path / "loaded", "llama_cpp", "/models/gemma.gguf")
    assert loaded.tps[(None, 1)] == pytest.approx(20.0) and loaded.free == 0.5
    assert est.parts(loaded, "llama_cpp", levels, m, 4, 120).bench_s == pytest.approx(crowded.bench_s)
    gpu = est.parts(h, "sglang", levels, m, 4, 120, (0.5, 1.0))
    assert gpu.bench_s == pytest.approx(quiet.bench_s) and not any("core" in a for a in gpu.assumptions)


def test_the_plan_reads_the_load_only_of_a_host_that_is_the_controller(tmp_path: Path) -> None:
    local = plan.HostInput("h0", "llama_cpp", llama().settings, local=True)
    said = build([local], tmp_path, steps=1)["sweep"]["estimate"]["assumptions"]
    assert any(a.startswith("the server gets ") for a in said), said
    said = build([llama()], tmp_path, steps=1)["sweep"]["estimate"]["assumptions"]
    assert not any(a.startswith("the server gets ") for a in said), said
    assert plan.cpu_now(llama()) is None and plan.cpu_now(local)[1] == 1.0


def test_the_end_of_sweep_line_says_the_cores_the_server_had_against_the_estimate(tmp_path: Path) -> None:
    sweep_with(tmp_path, [(10.0, 1.5), (12.0, 1.4)])
    planned = {"seconds": 100.0, "load_s": 2.0, "bench_s": 40.0, "cpu_free": 0.44}
    line = est.versus({"estimate": planned, "run_started_at": 0.0}, tmp_path / "old", 150.0)
    assert line == (
        "estimate 100 s, took 150 s (+50%); per launch load 2 s (estimated 2), benchmark 50 s "
        "(estimated 40); the server had 0.55 core(s) (estimated 0.44)"
    )
    # An estimate that did not see the load (a remote host, a GPU engine) says nothing of it.
    assert "core" not in est.versus({"estimate": {**planned, "cpu_free": None}, "run_started_at": 0.0},
                                    tmp_path / "old", 150.0)  # fmt: skip


def test_the_end_of_sweep_line_takes_a_close_calls_relaunches_apart(tmp_path: Path) -> None:
    # Two whole launches (50 s of benchmark) and a close call's two relaunches of one level (12 s):
    # the per-launch benchmark is the whole ones', the relaunches' beside their own estimate.
    sweep_with(tmp_path, [(10.0, 0.5), (12.0, 0.5), (10.0, 0.5), (12.0, 0.5)])
    for name in ("s2", "s3"):
        path = tmp_path / "old" / "h0" / f"{name}.json"
        fact = json.loads(path.read_text())
        fact["timings"]["bench_s"], fact["benchmark"] = 12.0, {"only": ["chat:4"]}
        path.write_text(json.dumps(fact))
    planned = {"seconds": 120.0, "load_s": 2.0, "bench_s": 48.0, "close_bench_s": 13.0}
    line = est.versus({"estimate": planned, "run_started_at": 0.0}, tmp_path / "old", 130.0)
    assert line == (
        "estimate 120 s, took 130 s (+8%); per launch load 2 s (estimated 2), benchmark 50 s "
        "(estimated 48), a close call's relaunch 12 s of benchmark (estimated 13)"
    )


def test_the_end_of_sweep_line_says_the_span_of_launches_the_finalists_could_make(tmp_path: Path) -> None:
    # A known launch spread: finalists only on a close call, so the plan had a span around its count.
    planned = {"seconds": 2301.0, "seconds_least": 1539.0, "seconds_most": 3063.0}
    line = est.versus({"estimate": planned, "run_started_at": 0.0}, tmp_path / "none", 1596.0)
    assert line == "estimate 2301 s (1539 to 3063 s as the finalists go), took 1596 s (-31%)"
    # Certain launches (an assumed spread, or no finalists): no span.
    # Racing's span, and both (the words are the plan's, analysis.sweep.estimate.SPAN_WORDS).
    raced = {"estimate": {**planned, "span_by": ["racing"]}, "run_started_at": 0.0}
    assert "(1539 to 3063 s as racing goes)" in est.versus(raced, tmp_path / "none", 1596.0)
    both = {"estimate": {**planned, "span_by": ["racing", "finalists"]}, "run_started_at": 0.0}
    assert "(1539 to 3063 s as racing and the finalists go)" in est.versus(both, tmp_path / "none", 1596.0)
    same = {**planned, "seconds_least": 2301.0, "seconds_most": 2301.0}
    assert est.versus({"estimate": same, "run_started_at": 0.0}, tmp_path / "none", 1596.0) == (
        "estimate 2301 s, took 1596 s (-31%)"
    )
