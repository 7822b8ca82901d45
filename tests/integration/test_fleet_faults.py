"""A fleet that loses hosts and servers mid-sweep: the rest finishes, nothing measured is lost.

Three SSH hosts of their own (these tests kill hosts), with the engine installed on each.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from sweeps import REPO, host_vars, playbook, playbook_argv, sweep_env
from testhosts import NetnsHosts

QUICK = ("-e", "repeats=1", "-e", "max_tokens=8", "-e", "warmup=0")


@pytest.fixture(scope="module")
def fleet(
    make_ssh_hosts, wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[NetnsHosts, Path]:
    hosts = make_ssh_hosts(["fleet1", "fleet2", "fleet3"])
    tmp = tmp_path_factory.mktemp("fleet")
    inventory = hosts.write_inventory(tmp / "hosts.yml", hostvars=host_vars(hosts, wheelhouse))
    install = playbook(inventory, tmp, "install", "-e", "plan_only=true")
    assert install.proc.returncode == 0, install.output[-4000:]
    return hosts, inventory


def wait_for(predicate, what: str, proc: subprocess.Popen, timeout: float = 600) -> None:
    """Poll until predicate() holds; fail if the sweep ended first or the deadline passed."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"the sweep ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.1)  # polling a condition, bounded by the deadline


def start_sweep(inventory: Path, results: Path, *extra: str) -> subprocess.Popen:
    log = open(results / "sweep.log", "wb")  # noqa: SIM115 - the child writes it
    return subprocess.Popen(playbook_argv(inventory, results, *extra), cwd=REPO, env=sweep_env(),
                            stdout=log, stderr=subprocess.STDOUT)  # fmt: skip


def test_server_that_dies_mid_benchmark_is_recorded_failed_and_the_sweep_goes_on(
    fleet: tuple[NetnsHosts, Path], tmp_path: Path
) -> None:
    hosts, inventory = fleet
    pidfile = hosts.opt_dir("fleet1") / "specsweep" / "run" / "server-8080.pid"
    proc = start_sweep(inventory, tmp_path, "-e", "sweep_id=D", "-e", "target=fleet1", "-e", "steps=1",
                       "-e", "repeats=3", "-e", "max_tokens=48", "-e", "warmup=0")  # fmt: skip

    def benchmarking() -> bool:
        return "specsweep_bench.py" in hosts.run_in_host("fleet1", ["ps", "-eo", "args"]).stdout

    wait_for(benchmarking, "benchmark of the baseline", proc)
    server = json.loads(pidfile.read_text())["server_pid"]  # the suite's own pidfile names the server
    assert hosts.run_in_host("fleet1", ["kill", "-KILL", str(server)]).returncode == 0
    assert proc.wait(timeout=600) != 0  # a failed config fails the run, at its end
    log = (tmp_path / "sweep.log").read_text()
    baseline = json.loads((tmp_path / "D" / "fleet1" / "baseline.json").read_text())
    assert baseline["status"] == "failed", baseline["failure"]
    failure = baseline["failure"]
    # The server's death, named as such: not the client's "connection refused".
    assert (failure["phase"], failure["cause"]) == ("benchmark", "server_exited"), failure
    assert failure["message"].startswith("server exited (signal 9: SIGKILL) during benchmark"), failure
    assert failure["log_tail"], failure
    s1 = json.loads((tmp_path / "D" / "fleet1" / "s1.json").read_text())
    assert s1["status"] == "ok", log[-3000:]  # the sweep went on to the next config
    assert "fleet1/baseline" in log


def test_a_second_sweep_refuses_a_host_in_use_and_leaves_the_first_alone(
    fleet: tuple[NetnsHosts, Path], tmp_path: Path
) -> None:
    hosts, inventory = fleet
    pidfile = hosts.opt_dir("fleet1") / "specsweep" / "run" / "server-8080.pid"
    first = start_sweep(inventory, tmp_path, "-e", "sweep_id=A", "-e", "target=fleet1", "-e", "steps=1,2",
                        *QUICK)  # fmt: skip
    wait_for(pidfile.exists, "the first sweep's server", first)
    second = playbook(inventory, tmp_path, "B", "-e", "target=fleet1", "-e", "steps=1", *QUICK)
    assert second.proc.returncode != 0
    assert "fleet1 is in use by sweep A" in second.output, second.output[-3000:]
    assert not list((tmp_path / "B").glob("*/*.json"))  # it measured nothing
    assert first.wait(timeout=600) == 0, (tmp_path / "sweep.log").read_text()[-3000:]
    facts = {p.name: json.loads(p.read_text())["status"] for p in (tmp_path / "A" / "fleet1").glob("*.json")}
    assert facts == {"baseline.json": "ok", "s1.json": "ok", "s2.json": "ok"}  # undisturbed
    assert not (hosts.opt_dir("fleet1") / "specsweep" / "run" / "sweep.lock").exists()  # released


def test_hosts_lost_before_and_during_a_sweep_leave_the_others_to_finish(
    fleet: tuple[NetnsHosts, Path], tmp_path: Path
) -> None:
    hosts, inventory = fleet
    hosts.stop_host("fleet3")  # unreachable from the start
    proc = start_sweep(inventory, tmp_path, "-e", "sweep_id=L", "-e", "steps=1,2", *QUICK)
    first = tmp_path / "L" / "fleet2" / "baseline.json"
    wait_for(first.exists, "first fact of fleet2", proc)
    hosts.stop_host("fleet2")  # its sshd (the host's init) and everything in it killed mid-sweep
    assert proc.wait(timeout=900) != 0
    log = (tmp_path / "sweep.log").read_text()
    facts = {p.relative_to(tmp_path / "L").as_posix(): json.loads(p.read_text())
             for p in (tmp_path / "L").glob("*/*.json")}  # fmt: skip
    assert {k: f["status"] for k, f in facts.items() if k.startswith("fleet1/")} == {
        "fleet1/baseline.json": "ok", "fleet1/s1.json": "ok", "fleet1/s2.json": "ok"
    }, log[-3000:]  # fmt: skip
    assert facts["fleet2/baseline.json"]["status"] == "ok"  # measured before the loss: kept
    assert not any(k.startswith("fleet3/") for k in facts)
    # The end of the run names the lost hosts and what they did not measure.
    assert "fleet3: not reached; not measured: baseline, s1, s2" in log, log[-3000:]
    assert "fleet2: lost mid-sweep; not measured: s1, s2" in log, log[-3000:]


def test_a_shard_host_lost_mid_benchmark_leaves_its_config_to_the_others_in_the_same_run(
    make_ssh_hosts, wheelhouse: Path, tmp_path: Path
) -> None:
    hosts = make_ssh_hosts(["shard1", "shard2"])
    inventory = hosts.write_inventory(tmp_path / "hosts.yml", hostvars=host_vars(hosts, wheelhouse))
    install = playbook(inventory, tmp_path, "install", "-e", "plan_only=true")
    assert install.proc.returncode == 0, install.output[-4000:]
    proc = start_sweep(inventory, tmp_path, "-e", "sweep_id=S", "-e", "mode=shard", "-e", "steps=1..4",
                       "-e", "repeats=2", "-e", "max_tokens=48", "-e", "warmup=0")  # fmt: skip
    claims = tmp_path / "S" / ".claims"

    def shard2_benchmarks_its_claim() -> str | None:
        mine = [p.parent.name for p in claims.glob("*/*/claim.json") if '"shard2"' in p.read_text()]
        running = "specsweep_bench.py" in hosts.run_in_host("shard2", ["ps", "-eo", "args"]).stdout
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
    assert measured >= {"baseline", "s1", "s2", "s3", "s4"}, (facts, log[-3000:])
    unfinished = claimed - {n.split("/")[1].removesuffix(".json") for n in facts if n.startswith("shard2/")}
    assert all(f"shard1/{c}.json" in facts for c in unfinished), (claimed, facts)
    assert "taking over from shard2, which left the run" in log, log[-3000:]
    assert "shard2: lost mid-sweep" in log, log[-3000:]
