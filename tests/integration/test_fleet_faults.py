"""A fleet that loses hosts and servers mid-sweep: the rest finishes, nothing measured is lost.

Three SSH hosts of their own (these tests kill hosts), given the engine sshost1 installed
(test_shard_faults.py: a shard host lost).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sweeps import QUICK, copy_engine, host_vars, playbook, start_sweep, wait_for
from testhosts import NetnsHosts


@pytest.fixture(scope="module")
def fleet(
    make_ssh_hosts,
    sweep_inventory: Path,
    ssh_hosts: NetnsHosts,
    wheelhouse: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[NetnsHosts, Path]:
    hosts = make_ssh_hosts(["fleet1", "fleet2", "fleet3"])
    # sweep_inventory has installed the engine on sshost1 (and tested that install).
    copy_engine(ssh_hosts.opt_dir("sshost1"), map(hosts.opt_dir, hosts.names))
    tmp = tmp_path_factory.mktemp("fleet")
    return hosts, hosts.write_inventory(tmp / "hosts.yml", hostvars=host_vars(hosts, wheelhouse))


def test_server_that_dies_mid_benchmark_is_recorded_failed_and_the_sweep_goes_on(
    fleet: tuple[NetnsHosts, Path], tmp_path: Path
) -> None:
    hosts, inventory = fleet
    pidfile = hosts.opt_dir("fleet1") / "specsweep" / "run" / "server-8080.pid"
    proc = start_sweep(inventory, tmp_path, "-e", "sweep_id=D", "-e", "target=fleet1", "-e", "steps=1",
                       "-e", "repeats=2", "-e", "max_tokens=24", "-e", "warmup=0")  # fmt: skip

    def benchmarking() -> bool:
        return "specsweep_bench.py" in hosts.run_in_host("fleet1", ["ps", "-ww", "-eo", "args"]).stdout

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
