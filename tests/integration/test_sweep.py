"""The sweep end to end over real SSH: two netns hosts, each running a real llama.cpp server."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from sweeps import QUICK
from testhosts import NetnsHosts


def test_sweep_on_two_hosts_records_every_config_and_prints_the_table(
    sweep_inventory: Path, run_sweep
) -> None:
    # A progress line every second: 2 repeats of 2 prompts x 24 tokens take longer than that.
    run = run_sweep(
        sweep_inventory, "-e", "steps=1,3", "-e", "repeats=2", "-e", "max_tokens=24", "-e", "warmup=0",
        "-e", "bench_requests=2", "-e", "benchmark_progress_interval_s=1",
    )  # fmt: skip
    assert run.proc.returncode == 0, run.output[-4000:]
    for host in ("sshost1", "sshost2"):  # where each host is, in the normal output
        assert re.search(rf"^\[{host}\] benchmarking \(repeat [12]/2 at concurrency 1\), \d+ s elapsed$",
                         run.output, re.M), run.output[-4000:]  # fmt: skip
    # Each host's last config: how far it got and when it will be done.
    eta = re.findall(r"config 3/3 s3: launching; 2 measured here \(0 failed\); ETA \d+ (s|min)", run.output)
    assert len(eta) == 2, run.output[-4000:]
    facts = run.facts()
    assert sorted(facts) == [(h, c) for h in ("sshost1", "sshost2") for c in ("baseline", "s1", "s3")], (
        run.output
    )
    for (host, config_id), fact in facts.items():
        assert fact.status == "ok", (host, config_id, fact.failure)
        assert fact.host_facts.hostname == host  # measured on that host, not the controller
        assert len(fact.runs) == 2
        assert all(r.output_tokens == 24 for run_ in fact.runs for r in run_.requests)
        assert fact.launch.argv[fact.launch.argv.index("--port") + 1] == "8080"
        if fact.config.speculative:
            assert fact.launch.argv[-1] == str(fact.config.steps)  # --spec-ngram-mod-n-max
            assert all(r.spec.drafted and 0 < r.spec.accepted <= r.spec.drafted for r in fact.runs)
        else:
            assert "--spec-type" not in fact.launch.argv
    # The table the playbook prints, one per host, with every config.
    for host in ("sshost1", "sshost2"):
        assert re.search(rf"host {host} \| llama_cpp", run.output), run.output[-3000:]
    assert re.search(r"^\s*\*?\s*s3\s+\d+\.\d", run.output, re.M), run.output[-3000:]
    # The end says the plan's estimate against what the sweep took, and the launches' medians.
    said = r"^estimate \d+ s, took (\d+) s \([+-]\d+%\); per launch load \d+ s \(estimated \d+\), benchmark "
    took = re.search(said, run.output, re.M)
    assert took and 0 < int(took[1]) < 3600, run.output[-3000:]


def test_plan_only_writes_exact_argv_and_second_run_changes_nothing(
    sweep_inventory: Path, run_sweep, ssh_hosts: NetnsHosts
) -> None:
    first = run_sweep(sweep_inventory, "-e", "steps=2", "-e", "plan_only=true", sweep_id="plan1")
    assert first.proc.returncode == 0, first.output[-4000:]
    plan = json.loads((first.sweep_dir / "plan.json").read_text())
    entries = {e["config"]["id"]: e for e in plan["hosts"]["sshost1"]["entries"]}
    assert sorted(entries) == ["baseline", "s2"]
    assert entries["s2"]["argv"][-2:] == ["--spec-ngram-mod-n-max", "2"]
    assert entries["s2"]["argv"][2:4] == ["-m", "/opt/specsweep/models/gemma-3-270m-q4_k_m.gguf"]
    assert not list(first.sweep_dir.glob("*/*.json")), "plan_only must not measure anything"
    # The client's command too, built by the plan from the sweep's settings, and printed.
    client = plan["hosts"]["sshost1"]["benchmark"]
    assert client["client"] == "specsweep" and client["argv"][1].endswith("/specsweep_bench.py"), client
    assert {"--engine=llama_cpp", "--concurrency=1"} <= set(client["argv"]), client
    assert f"client: {shlex.join(client['argv'])} (each launch" in first.output, first.output[-4000:]
    # Nothing was launched on the hosts, nor copied: the client's folder is the run's own, made by a
    # run that measures (another run never changes a running sweep's client or records).
    assert "server-8080.pid" not in ssh_hosts.run_in_host("sshost1", ["ls", "/opt/specsweep/run"]).stdout
    client_dir = plan["hosts"]["sshost1"]["client_dir"]
    assert client_dir == f"/opt/specsweep/bench/{plan['sweep']['run_id']}", client_dir
    assert client["argv"][1] == f"{client_dir}/specsweep_bench.py", client
    assert not (ssh_hosts.opt_dir("sshost1") / "specsweep" / "bench" / plan["sweep"]["run_id"]).exists()
    second = run_sweep(sweep_inventory, "-e", "steps=2", "-e", "plan_only=true", sweep_id="plan2")
    assert second.proc.returncode == 0, second.output[-4000:]
    for host in ("sshost1", "sshost2"):
        assert re.search(rf"^{host}\s+: ok=\d+\s+changed=0\s", second.output, re.M), second.output[-2000:]


def test_plan_for_sglang_hosts_shows_full_argv_env_and_host_problems(
    sglang_inventory: Path, run_sweep
) -> None:
    run = run_sweep(sglang_inventory, "-e", "steps=2,5", "-e", "topk=1", "-e", "plan_only=true")
    assert run.proc.returncode == 0, run.output[-4000:]
    plan = json.loads((run.sweep_dir / "plan.json").read_text())
    host = plan["hosts"]["sshost1"]
    entries = {e["config"]["id"]: e for e in host["entries"]}
    assert sorted(entries) == ["baseline", "s2-k1-d3", "s5-k1-d6"]
    argv = entries["s2-k1-d3"]["argv"]
    assert argv[1:3] == ["-m", "sglang.launch_server"]
    flags = {flag: argv[i + 1] for i, flag in enumerate(argv[:-1]) if flag.startswith("--")}
    assert flags["--speculative-algorithm"] == "EAGLE3"
    assert flags["--speculative-draft-model-path"] == "/opt/models/Kimi-K2.5-EAGLE3"
    assert (flags["--speculative-num-steps"], flags["--speculative-eagle-topk"]) == ("2", "1")
    assert flags["--speculative-num-draft-tokens"] == "3"
    assert flags["--tp-size"] == "8"
    assert flags["--api-key"] == "<redacted>"
    assert "s3cr3t-key" not in (run.sweep_dir / "plan.json").read_text()
    assert entries["s2-k1-d3"]["env"] == {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS"}
    assert "--speculative-algorithm" not in entries["baseline"]["argv"]
    # What the host's preflight found stops it; plan_only shows it and records it beside the plan.
    problems = " ".join(json.loads((run.sweep_dir / "sshost1.preflight.json").read_text())["problems"])
    assert "cannot import sglang on sshost1" in problems
    assert "/opt/models/Kimi-K2.5-int4 does not exist on sshost1" in problems
    assert re.search(r"^\[sshost1\] .*cannot import sglang on sshost1", run.output, re.M), run.output[-3000:]


def test_env_profiles_multiply_the_grid_and_resolve_per_config(sglang_inventory: Path, run_sweep) -> None:
    run = run_sweep(
        sglang_inventory,
        "-e",
        "steps=2",
        "-e",
        "env_profiles=nccl_default,nccl_ll_ring",
        "-e",
        "plan_only=true",
    )
    assert run.proc.returncode == 0, run.output[-4000:]
    plan = json.loads((run.sweep_dir / "plan.json").read_text())
    entries = {e["config"]["id"]: e for e in plan["hosts"]["sshost2"]["entries"]}
    assert sorted(entries) == [
        "baseline+nccl_default", "baseline+nccl_ll_ring", "s2+nccl_default", "s2+nccl_ll_ring"
    ]  # fmt: skip
    assert entries["s2+nccl_default"]["env"] == {}  # the profile removes the group's NCCL tuning
    assert entries["s2+nccl_ll_ring"]["env"]["NCCL_ALGO"] == "Ring"
    assert entries["s2+nccl_ll_ring"]["config"]["env_profile"] == "nccl_ll_ring"


def test_shard_mode_measures_each_config_once_across_hosts(sweep_inventory: Path, run_sweep) -> None:
    run = run_sweep(
        sweep_inventory, "-e", "mode=shard", "-e", "steps=1,2,3,4", "-e", "repeats=1", "-e", "max_tokens=8",
        "-e", "warmup=0", "-e", "bench_requests=2",
    )  # fmt: skip
    assert run.proc.returncode == 0, run.output[-4000:]
    facts = run.facts()
    by_config: dict[str, list[str]] = {}
    for host, config_id in facts:
        by_config.setdefault(config_id, []).append(host)
    assert sorted(by_config["baseline"]) == ["sshost1", "sshost2"]  # every host compares to its own
    assert {c: len(h) for c, h in by_config.items() if c != "baseline"} == {
        "s1": 1,
        "s2": 1,
        "s3": 1,
        "s4": 1,
    }
    spec_hosts = {h for c, hosts in by_config.items() if c != "baseline" for h in hosts}
    assert spec_hosts == {"sshost1", "sshost2"}, by_config  # the work was shared
    assert all(f.status == "ok" for f in facts.values())


def test_step_search_in_shard_mode_probes_over_both_hosts_and_records_each_probe(
    sweep_inventory: Path, run_sweep
) -> None:
    run = run_sweep(
        sweep_inventory, "-e", "mode=shard", "-e", "search=steps", "-e", "steps_range=1..5",
        "-e", "repeats=2", "-e", "max_tokens=8", "-e", "warmup=0", "-e", "bench_requests=2",
    )  # fmt: skip
    assert run.proc.returncode == 0, run.output[-4000:]
    facts = run.facts()
    probes = sorted(c for _, c in facts if c != "baseline")
    assert sorted(h for h, c in facts if c == "baseline") == ["sshost1", "sshost2"]
    assert len(probes) == len(set(probes)), probes  # each probe measured once, on one host
    assert set(probes) <= {"s1", "s2", "s3", "s4", "s5"}
    assert all(f.status == "ok" for f in facts.values())
    state = json.loads((run.sweep_dir / "search.json").read_text())
    assert state["done"] is True
    assert sorted(p["id"] for p in state["probes"]) == probes  # the search saw every fact
    assert state["best"] in probes
    assert all(p["reason"] for p in state["probes"])
    # The first round probes two points at once, one per host.
    assert {h for p in state["probes"][:2] for h in p["hosts"]} == {"sshost1", "sshost2"}, state["probes"]
    assert f"search over steps 1..5: best {state['best']}" in run.output


def with_hostvars(inventory: Path, out: Path, hostvars: dict[str, dict]) -> Path:
    """A copy of a test inventory (JSON) with extra variables for some hosts."""
    data = json.loads(inventory.read_text())
    for host, extra in hostvars.items():
        data["sweep"]["hosts"][host].update(extra)
    out.write_text(json.dumps(data))
    return out


def test_multi_node_plan_renders_each_rank_and_a_rank_without_its_leader_is_a_problem(
    sglang_inventory: Path, run_sweep, tmp_path: Path
) -> None:
    node = {"sglang_server_nnodes": 2, "sglang_server_dist_init_addr": "10.0.0.1:5000"}
    inventory = with_hostvars(sglang_inventory, tmp_path / "multi.yml", {
        "sshost1": {**node, "sglang_server_node_rank": 0},
        "sshost2": {**node, "sglang_server_node_rank": 1},
    })  # fmt: skip
    run = run_sweep(inventory, "-e", "steps=2", "-e", "plan_only=true")
    assert run.proc.returncode == 0, run.output[-4000:]
    plan = json.loads((run.sweep_dir / "plan.json").read_text())
    for host, rank in (("sshost1", "0"), ("sshost2", "1")):
        argv = plan["hosts"][host]["entries"][1]["argv"]
        flags = {flag: argv[i + 1] for i, flag in enumerate(argv[:-1]) if flag.startswith("--")}
        assert (flags["--nnodes"], flags["--node-rank"], flags["--dist-init-addr"]) == (
            "2",
            rank,
            "10.0.0.1:5000",
        )
    assert "node rank 1 on sshost2 needs specsweep_follows" in " ".join(plan["hosts"]["sshost2"]["problems"])
    assert "specsweep_follows" not in " ".join(plan["hosts"]["sshost1"]["problems"])


def test_a_host_that_follows_another_runs_each_config_beside_it_and_records_nothing(
    sweep_inventory: Path, run_sweep, ssh_hosts: NetnsHosts, tmp_path: Path
) -> None:
    inventory = with_hostvars(
        sweep_inventory, tmp_path / "follow.yml", {"sshost2": {"specsweep_follows": "sshost1"}}
    )
    run = run_sweep(inventory, "-e", "steps=1", *QUICK)
    assert run.proc.returncode == 0, run.output[-4000:]
    assert sorted(run.facts()) == [("sshost1", "baseline"), ("sshost1", "s1")]  # the leader's facts only
    logs = ssh_hosts.opt_dir("sshost2") / "specsweep" / "run" / run.sweep_dir.name
    assert sorted(p.name for p in logs.glob("*.log")) == ["baseline.log", "s1.log"]  # it ran its part of each
    ps = ssh_hosts.run_in_host("sshost2", ["ps", "-ww", "-eo", "args"]).stdout
    assert "specsweep_llama_server" not in ps, ps  # and stopped it
