"""Launches, the seeded order and the baseline again (or not, once the host has history), end to
end on one SSH host with llama-server."""

from __future__ import annotations

import json
from pathlib import Path

from analysis.facts.schema import load_fact
from analysis.sweep import order


def test_two_launches_each_in_the_seeded_order_and_the_baseline_again_at_the_end(
    sweep_inventory: Path, run_sweep
) -> None:
    # Seed 1 on sshost1 runs s1, baseline, ...: not the grid's order, and not the baseline first.
    run = run_sweep(
        sweep_inventory, "--limit", "sshost1", "-e", "steps=1", "-e", "launches=2", "-e", "order=random",
        "-e", "order_seed=1", "-e", "baseline_every=10", "-e", "repeats=2", "-e", "max_tokens=16",
        "-e", "warmup=0", "-e", "bench_requests=2", "-e", "prefetch=true",
    )  # fmt: skip
    assert run.proc.returncode == 0, run.output[-4000:]
    sweep = json.loads((run.sweep_dir / "sweep.json").read_text())
    assert sweep["settings"]["order_seed"] == 1 and sweep["settings"]["launches"] == 2
    # Racing is on by default with 2 launches; with no earlier sweep on the host it judges one launch
    # on the assumed launch spread, and the plan says so.
    assert sweep["settings"]["race"] is True
    assert "sshost1: launch spread 25% (assumed: no earlier sweep" in run.output, run.output[:3000]
    host_plan = json.loads((run.sweep_dir / "plan.json").read_text())["hosts"]["sshost1"]
    planned = [s["name"] for s in host_plan["order"] + host_plan["closing"]]
    first, closing = order.schedule([("baseline", False), ("s1", True)], 2, 1, "sshost1", 10)
    assert planned == [s["name"] for s in first + closing]
    assert planned[:2] == ["s1", "baseline"] and planned[-1] == "baseline.launch3"

    facts = {p.stem: load_fact(json.loads(p.read_text())) for p in (run.sweep_dir / "sshost1").glob("*.json")}
    # Two facts per config, the baseline's third at the end; each names its launch.
    assert sorted(facts) == sorted(planned), sorted(facts)
    assert all(f.status == "ok" and len(f.runs) == 2 for f in facts.values()), facts
    assert {name: f.launch_index for name, f in facts.items()} == {s: order.parse_name(s)[1] for s in planned}
    # They were measured in the planned order, the baseline again last.
    measured = sorted(facts, key=lambda name: facts[name].timings.started_at)
    assert measured == planned
    # Each fact records the spread it was judged on and the checkpoint read ahead during its benchmark.
    model = Path(host_plan["prefetch"][0])
    assert host_plan["prefetch"] == [host_plan["server"]["model"]]
    for fact in facts.values():
        assert fact.launch_prior is not None and not fact.launch_prior.from_history
        assert fact.prefetch is not None and fact.prefetch.files == 1 and fact.prefetch.missing == []
    assert model.name.endswith(".gguf") and all(f.prefetch.bytes > 0 for f in facts.values())
    # Every run says what else used the host while it was measured (no GPU here: no GPU pids).
    for fact in facts.values():
        for r in fact.runs:
            assert r.interference is not None and r.interference.load_avg_1m is not None
            assert r.interference.gpu_other_pids == []
    last = "config 5/5 baseline.launch3: launching; 4 measured here (0 failed)"
    assert last in run.output, run.output[-3000:]
    # The next sweep on this host reads its launch spread from this one (configs launched twice):
    # the baseline is not launched again by default, and the plan says so and why. (The suite's
    # sweeps pass baseline_every=0 and finalists=false: given empty and true here, the defaults.)
    nxt = run_sweep(
        sweep_inventory, "--limit", "sshost1", "-e", "steps=1", "-e", "plan_only=true",
        "-e", "baseline_every=", "-e", "finalists=true", sweep_id="next",
    )  # fmt: skip
    assert nxt.proc.returncode == 0, nxt.output[-4000:]
    next_plan = json.loads((nxt.sweep_dir / "plan.json").read_text())["hosts"]["sshost1"]
    assert next_plan["launch_prior"]["from_history"], next_plan["launch_prior"]
    assert next_plan["closing"] == [], next_plan["closing"]
    assert sorted(s["name"] for s in next_plan["order"]) == ["baseline", "s1"], next_plan["order"]
    assert f"from 1 earlier sweep(s) on sshost1 ({run.sweep_dir.name})" in nxt.output, nxt.output[-4000:]
    assert "no baseline-again launch: the host's earlier sweeps measured" in nxt.output, nxt.output[-4000:]
    # Its levels measure what a launch is worth there (analysis.sweep.levelsize): the host's client
    # is told the launch's cost (this sweep's load and suite time) and spread, not an interval.
    rule = next_plan["stopping"]
    assert rule["ci_pct"] is None and rule["launch_cost_s"] > 0, rule
    assert rule["launch_cv_pct"] == round(next_plan["launch_prior"]["cv_pct"], 3)
    argv = next_plan["benchmark"]["argv"]
    told = [f"--launch-cost-s={rule['launch_cost_s']}", f"--launch-cv-pct={rule['launch_cv_pct']}"]
    assert set(told) <= set(argv), argv
    assert "each level measures what a launch is worth" in nxt.output, nxt.output[-4000:]
    # And the host's client runs that rule (one launch, the same history): the fact records it, and
    # the level sent at least the minimum and at most its count (4 prompts); where it stops in
    # between is the measured spread's (tests/unit/test_level_size.py).
    ran = run_sweep(
        sweep_inventory, "--limit", "sshost1", "-e", "steps=1", "-e", "baseline=false", "-e", "repeats=1",
        "-e", "max_tokens=8", "-e", "warmup=0", "-e", "bench_min_requests=3", sweep_id="worth",
    )  # fmt: skip
    assert ran.proc.returncode == 0, ran.output[-4000:]
    (only,) = [load_fact(json.loads(p.read_text())) for p in (ran.sweep_dir / "sshost1").glob("*.json")]
    settings = only.benchmark
    assert settings is not None and settings.ci_pct is None, settings
    assert (settings.launch_cost_s, settings.launch_cv_pct) == (rule["launch_cost_s"], rule["launch_cv_pct"])
    assert [3 <= (r.requests_sent or 0) <= 4 for r in only.runs] == [True], only.runs


def test_a_finalists_relaunch_measures_only_the_levels_it_is_a_finalist_at(
    sweep_inventory: Path, run_sweep
) -> None:
    # One launch each at c = 1 and 2 without finalists; then s1's fact is made to have measured c = 1
    # only, as the baseline did there (a tie), and the sweep resumed with finalists on: s1 is a
    # finalist at c = 1 alone, so its relaunch measures c = 1 (the client's --only), and says so.
    quick = ("--limit", "sshost1", "-e", "steps=1", "-e", "concurrency=1,2", "-e", "repeats=1",
             "-e", "max_tokens=8", "-e", "warmup=0", "-e", "bench_requests=4")  # fmt: skip
    first = run_sweep(sweep_inventory, *quick)
    assert first.proc.returncode == 0, first.output[-4000:]
    host = first.sweep_dir / "sshost1"
    baseline, s1 = (json.loads((host / f"{name}.json").read_text()) for name in ("baseline", "s1"))
    s1["runs"] = [r for r in baseline["runs"] if r["concurrency"] == 1]
    (host / "s1.json").write_text(json.dumps(s1))
    again = run_sweep(sweep_inventory, *quick, "-e", "finalists=true")
    assert again.proc.returncode == 0, again.output[-4000:]
    assert "launched once more before a winner is named: s1 (at c=1)" in again.output, again.output[-4000:]
    assert "before the winner was named: sshost1/s1.launch2 (at c=1)" in again.output, again.output[-4000:]
    facts = {p.stem: load_fact(json.loads(p.read_text())) for p in host.glob("*.json")}
    assert sorted(facts) == ["baseline", "s1", "s1.launch2"], sorted(facts)
    relaunch = facts["s1.launch2"]
    assert relaunch.status == "ok" and [r.concurrency for r in relaunch.runs] == [1], relaunch.runs
    assert relaunch.benchmark is not None and relaunch.benchmark.only == ["1"]
    assert relaunch.benchmark.concurrency == [1, 2]  # what the sweep measures; `only`, what this launch did
