"""The answer per load level: a real CPU sweep over steps x concurrency ends in `recommend` and an
adaptive schedule SGLang's own loader reads; the adaptive arm is planned (and refused) for SGLang."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sglang_wheel import sglang_adaptive
from sweeps import REPO, playbook

GPU_EXAMPLE = REPO / "inventory" / "gpu.example.yml"


def test_one_launch_per_config_measures_every_level_and_recommend_answers_per_level(
    sweep_inventory: Path, run_sweep, tmp_path: Path
) -> None:
    slo = ("-e", "sla_ttft_p99_ms=60000", "-e", "sla_itl_p99_ms=5000")  # loose: a busy 2-core box meets them
    run = run_sweep(
        sweep_inventory, "-e", "target=sshost1", "-e", "steps=1,2", "-e", "concurrency=1,2",
        "-e", "repeats=2", "-e", "max_tokens=16", "-e", "warmup=0", "-e", "bench_requests=4", *slo,
        "-e", "objective=goodput",
    )  # fmt: skip
    assert run.proc.returncode == 0, run.output[-4000:]
    facts = run.facts()
    assert sorted(c for _, c in facts) == ["baseline", "s1", "s2"]  # one launch per config
    for fact in facts.values():
        assert sorted({r.concurrency for r in fact.runs}) == [1, 2]  # every level on that launch
        argv = fact.launch.argv
        assert argv[argv.index("-np") + 1] == "2"  # a slot per concurrent request
    assert "goodput" in run.output, run.output[-3000:]  # the SLOs flowed into the sweep's report
    # ... and the objective: the report ranked on it and says so in its footnote.
    assert "objective=goodput (chosen with -e objective" in run.output, run.output[-3000:]

    schedule = tmp_path / "adaptive.json"
    argv = [sys.executable, "-m", "analysis", "recommend", str(run.sweep_dir), "--format", "json",
            "--sla-ttft-p99-ms", "60000", "--sla-itl-p99-ms", "5000", "--objective", "goodput",
            "--adaptive-config", str(schedule)]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert sorted(answer["by_concurrency"]) == ["1", "2"] and answer["objective"] == "goodput"
    for level in answer["by_concurrency"].values():
        assert level["config"] in {"baseline", "s1", "s2"}
        assert {"tok_s", "speedup_ci", "within_noise", "meets_sla", "goodput_rps"} <= set(level)
        assert level["meets_sla"] is True and level["goodput_rps"] > 0
    # The schedule loads with SGLang 0.5.23's own loader, a batch-size key per measured level.
    _, entries = sglang_adaptive()["_load_adaptive_config"](str(schedule))
    assert sorted(entries) == [1, 2]
    # The server's own most running at once per level (analysis.metrics): its -np 2 slots cap it.
    argv = [sys.executable, "-m", "analysis", "report", str(run.sweep_dir), "--format", "json"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    counted = [r for r in rows if r["server_running_max"] is not None]
    assert counted and all(1 <= r["server_running_max"] <= r["concurrency"] for r in counted), rows


def test_the_adaptive_arm_is_planned_on_the_gpu_example_inventory_and_refused_where_sglang_would(
    tmp_path: Path,
) -> None:
    schedule = tmp_path / "schedule.json"
    schedule.write_text(json.dumps({"1": {"candidate_steps": [1, 2, 3]}, "16": {"candidate_steps": [0, 1]}}))
    # --tags plan: the plan only (these example hosts are documentation addresses, never reached).
    run = playbook(GPU_EXAMPLE, tmp_path, "adaptive", "--tags", "plan", "-e", "steps=1,2",
                   "-e", f"adaptive_config={schedule}")  # fmt: skip
    assert run.proc.returncode == 0, run.output[-4000:]
    host = json.loads((run.sweep_dir / "plan.json").read_text())["hosts"]["gpu-node-1"]
    adaptive = next(e for e in host["entries"] if e["config"]["adaptive"])
    argv = adaptive["argv"]
    assert argv[argv.index("--speculative-algorithm") + 1] == "EAGLE3"  # group_vars/gpu.yml's
    assert argv[argv.index("--speculative-num-steps") + 1] == "2"  # the middle of 0, 1, 2, 3
    config_path = argv[argv.index("--speculative-adaptive-config") + 1]
    assert config_path == host["adaptive_config"]["dest"] and "--speculative-adaptive" in argv

    for extra, refusal in [
        (("-e", "algorithm=NGRAM"), "speculative_algorithm=NGRAM (only EAGLE/EAGLE3 are supported)"),
        (("-e", "topk=4", "-e", "draft_tokens=8"), "speculative_eagle_topk=4 (only topk=1 is supported)"),
    ]:
        refused = playbook(GPU_EXAMPLE, tmp_path, "refused", "--tags", "plan", "-e", "steps=2",
                           "-e", f"adaptive_config={schedule}", *extra)  # fmt: skip
        assert refused.proc.returncode != 0
        assert f"adaptive_config: SGLang 0.5.23 refuses adaptive speculation: {refusal}" in refused.output
    cpu = playbook(REPO / "inventory" / "hosts.yml", tmp_path, "cpu", "--tags", "plan", "-e", "steps=2",
                   "-e", f"adaptive_config={schedule}")  # fmt: skip
    assert cpu.proc.returncode != 0
    assert "adaptive_config: llama_cpp has no adaptive speculation" in cpu.output, cpu.output[-2000:]
