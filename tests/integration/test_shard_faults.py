"""A host lost mid-benchmark in shard mode: the host that is left measures its claim in the same run.

Two SSH hosts of their own (the test kills one), given the engine sshost1 installed.
"""

from __future__ import annotations

import json
from pathlib import Path

from sweeps import copy_engine, host_vars, start_sweep, wait_for
from testhosts import NetnsHosts


def test_a_shard_host_lost_mid_benchmark_leaves_its_config_to_the_others_in_the_same_run(
    make_ssh_hosts, sweep_inventory: Path, ssh_hosts: NetnsHosts, wheelhouse: Path, tmp_path: Path
) -> None:
    hosts = make_ssh_hosts(["shard1", "shard2"])
    # sweep_inventory has installed the engine on sshost1 (and tested that install).
    copy_engine(ssh_hosts.opt_dir("sshost1"), map(hosts.opt_dir, hosts.names))
    inventory = hosts.write_inventory(tmp_path / "hosts.yml", hostvars=host_vars(hosts, wheelhouse))
    proc = start_sweep(inventory, tmp_path, "-e", "sweep_id=S", "-e", "mode=shard", "-e", "steps=1..3",
                       "-e", "repeats=2", "-e", "max_tokens=24", "-e", "warmup=0",
                       "-e", "bench_requests=2")  # fmt: skip
    claims = tmp_path / "S" / ".claims"

    def shard2_benchmarks_its_claim() -> str | None:
        mine = [p.parent.name for p in claims.glob("*/*/claim.json") if '"shard2"' in p.read_text()]
        running = "specsweep_bench.py" in hosts.run_in_host("shard2", ["ps", "-ww", "-eo", "args"]).stdout
        return mine[-1] if mine and running else None

    wait_for(shard2_benchmarks_its_claim, "shard2 measuring a config it claimed", proc)
    claimed = {p.parent.name for p in claims.glob("*/*/claim.json") if '"shard2"' in p.read_text()}
    hosts.stop_host("shard2")  # its sshd and everything in it, mid-benchmark
    assert proc.wait(timeout=900) == 4  # a host lost: Ansible's "unreachable"
    log = (tmp_path / "sweep.log").read_text()
    facts = {p.relative_to(tmp_path / "S").as_posix(): json.loads(p.read_text())["status"]
             for p in (tmp_path / "S").glob("*/*.json")}  # fmt: skip
    measured = {name.split("/")[1].removesuffix(".json") for name, status in facts.items() if status == "ok"}
    # Every config measured in this run, the lost host's claim by the host that is left.
    assert measured >= {"baseline", "s1", "s2", "s3"}, (facts, log[-3000:])
    unfinished = claimed - {n.split("/")[1].removesuffix(".json") for n in facts if n.startswith("shard2/")}
    assert all(f"shard1/{c}.json" in facts for c in unfinished), (claimed, facts)
    assert "taking over from shard2, which left the run" in log, log[-3000:]
    assert "shard2: lost mid-sweep" in log, log[-3000:]
