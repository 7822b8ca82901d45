"""A controller that is interrupted or dies mid-sweep gives its hosts back, and a server that hangs
is named: real ansible-playbook runs over the SSH hosts against a real llama.cpp server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from sweeps import QUICK, REPO, playbook, playbook_argv, sweep_env, wait_for
from testhosts import NetnsHosts

HOST = "sshost1"


def run_dir(hosts: NetnsHosts, host: str = HOST) -> Path:
    """The host's server_process_run_dir, seen from the controller."""
    return hosts.opt_dir(host) / "specsweep" / "run"


def server_record(hosts: NetnsHosts) -> dict[str, Any] | None:
    """The pid record of the server on port 8080, when one is running."""
    try:
        return json.loads((run_dir(hosts) / "server-8080.pid").read_text())
    except (OSError, ValueError):
        return None


def alive(hosts: NetnsHosts, pid: int) -> bool:
    """Whether pid runs (not a zombie) in the host's own pid namespace."""
    state = hosts.run_in_host(HOST, ["ps", "-o", "stat=", "-p", str(pid)]).stdout.strip()
    return bool(state) and not state.startswith("Z")


def playbooks_of(results: Path) -> list[int]:
    """Controller processes of ansible-playbook whose command line names `results` (one run's)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ours = str(results).encode() in b" ".join(argv)
        if ours and any(a.endswith(b"ansible-playbook") for a in argv[:2]):
            found.append(int(entry.name))
    return found


def start_sweep(inventory: Path, results: Path, *extra: str, target: str = HOST) -> subprocess.Popen:
    """ansible-playbook sweep.yml in its own session (as a terminal would run it), logging to results/."""
    log = open(results / "sweep.log", "wb")  # noqa: SIM115 - the child writes it
    argv = playbook_argv(inventory, results, "-e", f"target={target}", *extra)
    return subprocess.Popen(argv, cwd=REPO, env=sweep_env(), stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_controller_stops_its_servers_and_releases_its_lock_then_resumes(
    sweep_inventory: Path, ssh_hosts: NetnsHosts, tmp_path: Path, signum: signal.Signals
) -> None:
    proc = start_sweep(sweep_inventory, tmp_path, "-e", "sweep_id=I", "-e", "steps=1", *QUICK)
    first = tmp_path / "I" / HOST / "baseline.json"
    wait_for(first.exists, "the first fact", proc=proc)

    # The next config's server is up (or coming up) when the operator presses Ctrl-C.
    def s1_server() -> dict[str, Any] | None:
        record = server_record(ssh_hosts)
        return record if record and record.get("argv", [])[-1:] == ["1"] else None  # --spec-ngram-mod-n-max 1

    record = wait_for(s1_server, "s1's server", proc=proc)
    before = first.read_bytes()
    interrupted = time.monotonic()
    os.kill(proc.pid, signum)  # ansible-playbook itself, as Ctrl-C or `kill` reaches it
    proc.wait(timeout=120)
    took = time.monotonic() - interrupted
    log = (tmp_path / "sweep.log").read_text()
    assert proc.returncode != 0, log[-3000:]
    assert took < 60, log[-3000:]  # every host back within 60 s (the release's bound is 50 s)
    assert "interrupted: stopping the servers of sweep I" in log, log[-3000:]
    assert not alive(ssh_hosts, record["server_pid"]), log[-3000:]
    assert not (run_dir(ssh_hosts) / "sweep.lock").exists(), log[-3000:]
    assert first.read_bytes() == before  # what was recorded stays

    resumed = playbook(sweep_inventory, tmp_path, "I", "-e", f"target={HOST}", "-e", "steps=1", *QUICK)
    assert resumed.proc.returncode == 0, resumed.output[-3000:]
    assert "config 1/2 baseline: measured already, skipped" in resumed.output
    assert sorted(c for _, c in resumed.facts()) == ["baseline", "s1"]


def test_a_controller_killed_outright_is_outlived_by_the_hosts_lease(
    sweep_inventory: Path, ssh_hosts: NetnsHosts, tmp_path: Path
) -> None:
    # The shortest lease the sweep takes: the supervisor must not stop a healthy run before it.
    # A benchmark of about 100 s that keeps the server idle between its arrivals (open loop, 0.2/s):
    # a worker of the killed run still following it would renew the lease for that long.
    proc = start_sweep(sweep_inventory, tmp_path, "-e", "sweep_id=K", "-e", "steps=1", "-e", "lease_s=30",
                       "-e", "repeats=1", "-e", "max_tokens=8", "-e", "warmup=0", "-e", "bench_requests=20",
                       "-e", "request_rate=0.2")  # fmt: skip
    record = wait_for(lambda: server_record(ssh_hosts), "the first server", proc=proc)
    # The benchmark runs, followed in slices by a worker process (a fork in its own session).
    wait_for((run_dir(ssh_hosts) / "K" / "baseline.bench.json.job").exists, "the benchmark", proc=proc)
    # Only the main ansible-playbook process dies (an OOM kill): no handler, no cleanup. Its workers must
    # not live on, retrying the benchmark and renewing the lease with each retry.
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed = time.monotonic()
    lock = run_dir(ssh_hosts) / "sweep.lock"
    wait_for(lambda: not lock.exists() and not alive(ssh_hosts, record["server_pid"]),
             "the host giving itself back", timeout=30 + 60)  # fmt: skip
    # (the 30 s lease, the client's 10 s grace and the server's stop, on a loaded machine)
    assert time.monotonic() - killed >= 20  # the lease ran out (renewed last just before the kill)
    assert playbooks_of(tmp_path) == [], "an ansible-playbook of the killed run is left"
    log = (run_dir(ssh_hosts) / "K" / "baseline.log").read_text()
    assert "lease expired" in log, log[-2000:]

    resumed = playbook(sweep_inventory, tmp_path, "K", "-e", f"target={HOST}", "-e", "steps=1", *QUICK)
    assert resumed.proc.returncode == 0, resumed.output[-3000:]
    assert sorted(c for _, c in resumed.facts()) == ["baseline", "s1"]


def test_a_server_stopped_while_loading_is_named_hung_and_killed_without_the_grace(
    sweep_inventory: Path, ssh_hosts: NetnsHosts, tmp_path: Path
) -> None:
    proc = start_sweep(sweep_inventory, tmp_path, "-e", "sweep_id=H", "-e", "steps=1", "-e", "baseline=false",
                       *QUICK)  # fmt: skip
    record = wait_for(lambda: server_record(ssh_hosts), "the server", proc=proc)
    stopped = ssh_hosts.run_in_host(HOST, ["kill", "-STOP", str(record["server_pid"])])
    assert stopped.returncode == 0, stopped.stderr
    proc.wait(timeout=120)
    log = (tmp_path / "sweep.log").read_text()
    fact = json.loads((tmp_path / "H" / HOST / "s1.json").read_text())
    assert fact["status"] == "failed", log[-3000:]
    assert fact["failure"]["cause"] == "hung", fact["failure"]
    assert "state T" in fact["failure"]["message"], fact["failure"]
    # Named within a poll and stopped at once: nowhere near the 120 s health timeout or the 60 s grace.
    assert fact["timings"]["finished_at"] - fact["timings"]["started_at"] < 30, fact["timings"]
    assert not alive(ssh_hosts, record["server_pid"])
    assert "[sshost1] s1: failed in load: hung" in log, log[-3000:]


def client_pid(hosts: NetnsHosts, host: str) -> int | None:
    """The benchmark client running on `host`, if any (a test may look by name; the suite never does)."""
    listing = hosts.run_in_host(host, ["ps", "-ww", "-eo", "pid=,args="]).stdout.splitlines()
    return next((int(line.split()[0]) for line in listing if "specsweep_bench.py" in line), None)


def test_a_shard_host_waiting_for_another_hosts_config_keeps_its_lease(
    sweep_inventory: Path, ssh_hosts: NetnsHosts, tmp_path: Path
) -> None:
    proc = start_sweep(sweep_inventory, tmp_path, "-e", "sweep_id=W", "-e", "mode=shard", "-e", "steps=1,2",
                       "-e", "lease_s=30", "-e", "repeats=1", "-e", "max_tokens=32", "-e", "warmup=0",
                       target="sweep")  # fmt: skip
    sweep = tmp_path / "W"

    def claimed() -> dict[str, str]:
        """Config -> the host that claimed it."""
        return {
            p.parent.name: json.loads(p.read_text())["host"] for p in sweep.glob(".claims/*/*/claim.json")
        }

    def mine(host: str) -> list[str]:
        return ["baseline", *(c for c, owner in claimed().items() if owner == host)]

    # Every config claimed, and one host benchmarking a claim of its own (its baseline is recorded).
    def busy_on_its_claim() -> tuple[str, str, int] | None:
        if len(claimed()) < 2:
            return None
        for busy, other in (ssh_hosts.names, ssh_hosts.names[::-1]):
            pending = [c for c in mine(busy) if not (sweep / busy / f"{c}.json").exists()]
            pid = client_pid(ssh_hosts, busy)
            if pid and pending and pending[0] != "baseline":
                return busy, other, pid
        return None

    busy, waiting, pid = wait_for(busy_on_its_claim, "a host benchmarking its claim", timeout=300, proc=proc)
    # The busy host's client held for longer than the lease: the other host measures all it claimed,
    # then waits for it, and must keep renewing its own lease while it waits.
    assert ssh_hosts.run_in_host(busy, ["kill", "-STOP", str(pid)]).returncode == 0
    lock = run_dir(ssh_hosts, waiting) / "sweep.lock"
    try:
        done = lambda: all((sweep / waiting / f"{c}.json").exists() for c in mine(waiting))  # noqa: E731 - a condition
        wait_for(done, "the other host measuring all it claimed", timeout=120, proc=proc)
        waits = time.time()
        # Renewed at its first wait and every third of the lease after it; without, gone after 30 s.
        renewed = lambda: lock.exists() and lock.stat().st_mtime > waits + 15  # noqa: E731 - a condition
        wait_for(renewed, "renewal of the waiting host's lease", timeout=45, proc=proc)
    finally:
        ssh_hosts.run_in_host(busy, ["kill", "-CONT", str(pid)])
    assert proc.wait(timeout=300) == 0, (tmp_path / "sweep.log").read_text()[-3000:]
    facts = {p.relative_to(sweep).as_posix(): json.loads(p.read_text()) for p in sweep.glob("*/*.json")}
    assert sorted(f["status"] for f in facts.values()) == ["ok"] * 4, facts.keys()
    for host in ssh_hosts.names:
        for log in (run_dir(ssh_hosts, host) / "W").glob("*.log"):
            assert "lease expired" not in log.read_text(), (host, log.name)


def group_left(hosts: NetnsHosts, pgid: int) -> list[str]:
    """What still runs (not a zombie) in process group `pgid` on the host: the pids and commands."""
    listing = hosts.run_in_host(HOST, ["ps", "-ww", "-eo", "pgid=,stat=,pid=,args="]).stdout.splitlines()
    return [line for line in listing if line.split()[0] == str(pgid) and not line.split()[1].startswith("Z")]


def test_a_stopped_sweep_stops_its_duration_benchmark_client_before_the_host_is_given_back(
    sweep_inventory: Path, ssh_hosts: NetnsHosts, tmp_path: Path
) -> None:
    # A benchmark that runs for a duration, not a count: before, its client was reparented and went
    # on sending to the port for the rest of its 300 s after the lock said the host was free.
    proc = start_sweep(sweep_inventory, tmp_path, "-e", "sweep_id=D", "-e", "steps=1", "-e", "baseline=false",
                       "-e", "repeats=1", "-e", "max_tokens=8", "-e", "warmup=0",
                       "-e", "bench_duration_s=300")  # fmt: skip
    lock = run_dir(ssh_hosts) / "sweep.lock"
    files = run_dir(ssh_hosts) / "D" / "s1.bench.json"
    started = lambda: "repeat 1/1" in Path(f"{files}.stderr").read_text()  # noqa: E731 - a condition
    wait_for(lambda: Path(f"{files}.stderr").exists() and started(), "the benchmark", proc=proc)
    record = json.loads(Path(f"{files}.job").read_text())
    assert any("specsweep_bench.py" in line for line in group_left(ssh_hosts, record["pid"]))
    in_lock = json.loads(lock.read_text()).get("client")  # specsweep_job adds it as it starts the client
    probe = ["python3", "-c", "import socket; socket.create_connection(('127.0.0.1', 8080), 1)"]
    os.kill(proc.pid, signal.SIGTERM)
    signalled = time.monotonic()
    wait_for(lambda: not group_left(ssh_hosts, record["pid"]), "the client's end", timeout=30)
    # Nothing listens on the port either, within 30 s of the stop (issue 44's bound).
    port_free = lambda: ssh_hosts.run_in_host(HOST, probe).returncode != 0  # noqa: E731 - a condition
    wait_for(port_free, "the port's release", timeout=max(0.0, 30 - (time.monotonic() - signalled)))
    proc.wait(timeout=120)
    log = (tmp_path / "sweep.log").read_text()
    # The lock named the client, so that any release of the host stops it first.
    ids = ("pid", "start_ticks")
    assert in_lock is not None and [in_lock[k] for k in ids] == [record[k] for k in ids], in_lock
    assert "interrupted: stopping the servers of sweep D" in log, log[-3000:]
    # Stopped by the release (its SIGTERM: it printed what it had), not left to die of refused
    # connections once the server was gone, or to go on sending where errors are only counted.
    said = Path(f"{files}.stdout").read_text()
    assert said.startswith('{"error": "stopped by SIGTERM"'), said[-2000:]
    assert not lock.exists(), log[-3000:]
    assert port_free(), "something listens on the port again"


def test_a_server_an_ended_run_left_on_the_port_is_refused_at_preflight_naming_its_run(
    sweep_inventory: Path, ssh_hosts: NetnsHosts, tmp_path: Path
) -> None:
    # A run dies with its server's supervisor (kill -9 of both, as an OOM kill of the controller and a
    # hand-killed supervisor would): nothing stops its server, which goes on holding the port.
    # Its client goes on too, open loop at 0.2/s so that the server idles between arrivals (closed
    # loop, it would decode on a core for the rest of the test).
    proc = start_sweep(sweep_inventory, tmp_path, "-e", "sweep_id=E", "-e", "steps=1", "-e", "baseline=false",
                       "-e", "repeats=1", "-e", "max_tokens=8", "-e", "warmup=0",
                       "-e", "bench_duration_s=120", "-e", "request_rate=0.2")  # fmt: skip
    files = run_dir(ssh_hosts) / "E" / "s1.bench.json"
    wait_for(Path(f"{files}.job").exists, "the benchmark", proc=proc)
    record = server_record(ssh_hosts)
    assert record is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert ssh_hosts.run_in_host(HOST, ["kill", "-9", str(record["pid"])]).returncode == 0
    lock = run_dir(ssh_hosts) / "sweep.lock"
    ended = json.loads(lock.read_text())
    wait_for(lambda: not playbooks_of(tmp_path), "the killed run's workers' end")

    # The next sweep is refused before it launches anything, naming the run, the pid and what to do.
    second = playbook(sweep_inventory, tmp_path, "N", "-e", f"target={HOST}", "-e", "steps=1", *QUICK)
    out = second.output
    assert second.proc.returncode == 2, out[-3000:]
    name = ssh_hosts.run_in_host(HOST, ["cat", f"/proc/{record['server_pid']}/comm"]).stdout.strip()
    said = (
        f"{HOST}: port 8080 is held by pid {record['server_pid']} ({name}), the server that run "
        f"{ended['run_id']} of sweep E started here and did not stop"
    )
    assert said in out, out[-3000:]
    # Its supervisor is gone too: nothing of the run will stop it.
    release_cmd = f"playbooks/release.yml -e release=E -e target={HOST}"
    todo = f"It is the operator's to stop: `ansible-playbook {release_cmd}"
    assert todo in out, out[-3000:]
    assert "launching" not in out and second.facts() == {}, out[-3000:]
    # Nothing was stopped, and the ended run's lock still names what it left.
    assert alive(ssh_hosts, record["server_pid"])
    assert json.loads(lock.read_text()) == ended
    assert ended["server"]["server_pid"] == record["server_pid"], ended

    # What the refusal says to do frees the host.
    ansible_playbook = playbook_argv(sweep_inventory, tmp_path)[0]
    release = subprocess.run(
        [ansible_playbook, "playbooks/release.yml", "-i", str(sweep_inventory), "-e", "release=E",
         "-e", f"target={HOST}", "-e", f"release_results_dir={tmp_path}"],
        cwd=REPO, env=sweep_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert release.returncode == 0, (release.stdout + release.stderr)[-3000:]
    assert not alive(ssh_hosts, record["server_pid"]) and not lock.exists()
    # The ended run's benchmark client (its lock named it) went with it.
    assert "specsweep_bench.py" not in ssh_hosts.run_in_host(HOST, ["ps", "-ww", "-eo", "args"]).stdout
