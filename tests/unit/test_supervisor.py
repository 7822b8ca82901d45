"""The server supervisor and lease watchdog (plugins/module_utils/specsweep_supervisor.py) with real
processes: a small Python script stands in for the server, a real lock file holds the lease."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from module_runner import module_utils, run_module

sup = module_utils("specsweep_supervisor")
proc = module_utils("specsweep_proc")

# The stand-in server: "sleep" prints its cwd and FOO and waits; "exit N" exits N once
# started; "spawn" starts a worker (deaf to SIGTERM) in its group, prints its pid and exits 0.
SERVER = r"""
import os, signal, subprocess, sys, time
mode = sys.argv[1]
print("server", mode, os.getcwd(), os.environ.get("FOO"), os.environ.get("SPECSWEEP_TEST_SECRET"), flush=True)
if mode == "exit":
    sys.exit(int(sys.argv[2]))
if mode == "spawn":
    worker = subprocess.Popen([sys.executable, "-c",
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('worker', flush=True)\n"
        "while True: time.sleep(60)"])
    print("worker pid", worker.pid, flush=True)
    time.sleep(0.5)
    sys.exit(0)
while True:
    time.sleep(60)
"""
RUN = "run-1"


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[subprocess.Popen]]:
    """Supervisors (and client stand-ins) the test starts: their groups killed and reaped at the end."""
    children: list[subprocess.Popen] = []
    yield children
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=10)


def lock(path: Path, run_id: str = RUN) -> Path:
    """A sweep.lock as specsweep_lock writes it."""
    proc.write_json_atomic(str(path), {"run_id": run_id, "sweep_id": "sw"})
    return path


def launch(tmp_path: Path, started: list, mode: list[str], **extra: Any) -> tuple[subprocess.Popen, dict]:
    """A supervisor of the stand-in server in `mode`; returns it and its record once written."""
    args = {
        "argv": [sys.executable, "-c", SERVER, *mode],
        "env": {"PATH": os.environ["PATH"], "FOO": "bar"},
        "cwd": str(tmp_path),
        "pidfile": str(tmp_path / "server.pid"),
        "log_path": str(tmp_path / "server.log"),
        "stop_grace_s": 2.0,
        "run_id": RUN,
        "lease_path": None,
        "lease_s": None,
        "job_path": None,
        **extra,
    }
    os.environ["SPECSWEEP_TEST_SECRET"] = "must-not-leak"
    try:
        with open(args["log_path"], "wb") as log:
            supervisor = sup.launch(args, log, {"PATH": os.environ["PATH"]})
    finally:
        del os.environ["SPECSWEEP_TEST_SECRET"]
    started.append(supervisor)

    def written() -> bool:
        record = proc.read_pidfile(args["pidfile"])
        return record is not None or supervisor.poll() is not None

    assert proc.wait_until(written, 30), "no record within 30 s"
    return supervisor, proc.read_pidfile(args["pidfile"]) or {}


def log_text(tmp_path: Path) -> str:
    return (tmp_path / "server.log").read_text()


def ended(supervisor: subprocess.Popen, timeout_s: float = 20) -> int:
    """The supervisor's exit status, once it has exited (within `timeout_s`)."""
    return supervisor.wait(timeout=timeout_s)


def test_the_server_runs_in_the_supervisors_group_and_its_exit_code_is_recorded(
    tmp_path: Path, started: list
) -> None:
    supervisor, record = launch(tmp_path, started, ["exit", "3"])
    assert record["pid"] == supervisor.pid and record["server_pid"] != supervisor.pid
    assert record["start_ticks"] == proc.proc_stat(supervisor.pid)["start_ticks"]
    assert record["argv"][-2:] == ["exit", "3"] and record["run_id"] == RUN
    assert ended(supervisor) == 0
    final = json.loads((tmp_path / "server.pid").read_text())
    assert final["exit"]["returncode"] == 3 and final["exit"]["signal"] is None, final
    assert final["exit"]["reason"] is None
    assert sup.describe_exit(final["exit"]) == "exit status 3"
    # The server got the given env and cwd, nothing of the launching environment.
    assert f"server exit {tmp_path} bar None" in log_text(tmp_path)


def test_the_supervisor_leads_the_group_the_server_runs_in(tmp_path: Path, started: list) -> None:
    supervisor, record = launch(tmp_path, started, ["sleep"])
    server = proc.proc_stat(record["server_pid"])
    assert server is not None and record["server_start_ticks"] == server["start_ticks"]
    assert (server["ppid"], server["pgrp"]) == (supervisor.pid, supervisor.pid)
    assert sorted(m["pid"] for m in proc.group_members(supervisor.pid)) == sorted(
        [supervisor.pid, server["pid"]]
    )
    assert sup.server_running(record) is True


def test_a_server_killed_by_a_signal_is_recorded_with_its_name(tmp_path: Path, started: list) -> None:
    supervisor, record = launch(tmp_path, started, ["sleep"])
    os.kill(record["server_pid"], signal.SIGKILL)
    assert ended(supervisor) == 0
    assert sup.server_running(record) is False
    status = sup.server_exit(str(tmp_path / "server.pid"))
    assert status is not None and (status["returncode"], status["signal"], status["signal_name"]) == (
        -9, 9, "SIGKILL")  # fmt: skip
    assert sup.describe_exit(status) == "signal 9: SIGKILL"


def test_stopping_the_recorded_group_stops_both_and_the_sigterm_is_recorded(
    tmp_path: Path, started: list
) -> None:
    supervisor, record = launch(tmp_path, started, ["sleep"])
    assert proc.stop_group(record, term_grace_s=20) is True
    # The supervisor outlived the SIGTERM the whole group got, to record how the server ended.
    assert ended(supervisor) == 0
    status = json.loads((tmp_path / "server.pid").read_text())["exit"]
    assert (status["signal_name"], status["reason"]) == ("SIGTERM", None)


def test_a_stopped_server_is_killed_at_once(tmp_path: Path, started: list) -> None:
    supervisor, record = launch(tmp_path, started, ["sleep"])
    os.kill(record["server_pid"], signal.SIGSTOP)
    assert proc.wait_until(lambda: proc.proc_stat(record["server_pid"])["state"] == "T", 10)
    begun = time.monotonic()
    assert proc.stop_group(record, term_grace_s=60) is True
    assert time.monotonic() - begun < 15, "a stopped server must not wait out the 60 s grace"
    assert ended(supervisor) == -signal.SIGKILL
    assert proc.proc_start_ticks(record["server_pid"]) is None


def test_an_expired_lease_stops_server_and_client_and_releases_the_lock(
    tmp_path: Path, started: list
) -> None:
    lease = lock(tmp_path / "sweep.lock")
    # The benchmark client, recorded as specsweep_job records it (its own session).
    client = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(60)"],
                              start_new_session=True)  # fmt: skip
    started.append(client)
    job = tmp_path / "s1.bench.json"
    proc.write_json_atomic(
        f"{job}.job", {"pid": client.pid, "start_ticks": proc.proc_start_ticks(client.pid)}
    )
    begun = time.monotonic()
    supervisor, record = launch(
        tmp_path, started, ["sleep"], lease_path=str(lease), lease_s=1.0, job_path=str(job)
    )
    assert ended(supervisor) == 0
    assert time.monotonic() - begun >= 1.0, "stopped before the lease ran out"
    assert client.wait(timeout=10) == -signal.SIGTERM
    assert sup.server_running(record) is False
    assert not lease.exists(), "the lock of this run was not released"
    status = json.loads((tmp_path / "server.pid").read_text())["exit"]
    assert status["signal_name"] == "SIGTERM" and status["reason"].startswith("lease expired"), status
    last = log_text(tmp_path).splitlines()[-1]
    assert last.startswith("specsweep supervisor: lease expired: the lock"), last
    assert "was not renewed for" in last and "(lease 1 s)" in last, last


def test_a_renewed_lease_keeps_the_server_until_renewals_stop(tmp_path: Path, started: list) -> None:
    lease = lock(tmp_path / "sweep.lock")
    supervisor, record = launch(tmp_path, started, ["sleep"], lease_path=str(lease), lease_s=2.0)
    # Renew as module calls do, for more than twice the lease: the server must stay up throughout.
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        assert sup.renew_lease(str(lease), RUN) is True
        assert supervisor.poll() is None and sup.server_running(record), log_text(tmp_path)
        time.sleep(0.2)  # the renewal interval of this stand-in controller, not a synchronisation
    assert ended(supervisor) == 0
    assert "lease expired" in log_text(tmp_path).splitlines()[-1]
    assert not lease.exists()


def test_a_lock_taken_by_another_run_stops_the_server_and_stays_theirs(tmp_path: Path, started: list) -> None:
    lease = lock(tmp_path / "sweep.lock")
    supervisor, record = launch(tmp_path, started, ["sleep"], lease_path=str(lease), lease_s=600.0)
    lock(lease, "run-2")  # a later run took the host over (specsweep_lock steal_from)
    assert ended(supervisor) == 0
    assert sup.server_running(record) is False
    assert json.loads(lease.read_text())["run_id"] == "run-2"
    assert f"lease lost: the lock {lease} is held by run run-2 now" in log_text(tmp_path).splitlines()[-1]


def test_a_removed_lock_stops_the_server(tmp_path: Path, started: list) -> None:
    lease = lock(tmp_path / "sweep.lock")
    supervisor, record = launch(tmp_path, started, ["sleep"], lease_path=str(lease), lease_s=600.0)
    lease.unlink()
    assert ended(supervisor) == 0
    assert sup.server_running(record) is False
    assert f"lease lost: the lock {lease} is gone" in log_text(tmp_path)


def test_renew_lease_touches_only_the_lock_of_its_run(tmp_path: Path) -> None:
    lease = lock(tmp_path / "sweep.lock")
    old = time.time() - 100
    os.utime(lease, (old, old))
    assert sup.renew_lease(str(lease), "run-2") is False
    assert lease.stat().st_mtime == pytest.approx(old)
    assert sup.renew_lease(str(lease), RUN) is True
    assert lease.stat().st_mtime > old + 90
    assert sup.lease_problem(str(lease), RUN, 10.0) is None
    os.utime(lease, (old, old))
    assert sup.lease_problem(str(lease), RUN, 10.0) == (
        f"lease expired: the lock {lease} was not renewed for 100 s (lease 10 s)"
    )
    (tmp_path / "torn.lock").write_text('{"run_id": "ru')
    assert sup.renew_lease(str(tmp_path / "torn.lock"), RUN) is False
    assert sup.renew_lease(str(tmp_path / "missing.lock"), RUN) is False


def test_a_server_that_cannot_start_leaves_a_line_and_no_record(tmp_path: Path, started: list) -> None:
    supervisor, record = launch(tmp_path, started, [], argv=["/nonexistent/llama-server", "-m", "x.gguf"])
    assert record == {} and ended(supervisor) == 127
    assert "specsweep supervisor: cannot start the server: [Errno 2] No such file or directory" in log_text(
        tmp_path
    )
    assert not (tmp_path / "server.pid").exists()


def test_workers_the_server_leaves_behind_go_with_it(tmp_path: Path, started: list) -> None:
    supervisor, _ = launch(tmp_path, started, ["spawn"])
    # The worker ignores SIGTERM: after the grace the supervisor kills the group, itself included.
    assert ended(supervisor) == -signal.SIGKILL
    worker = int(log_text(tmp_path).split("worker pid ")[1].split()[0])
    # SIGKILL of a group lands on each member in turn: the supervisor may be reaped a moment before
    # the worker is gone. Gone within 5 s, or the test fails.
    deadline = time.monotonic() + 5.0
    while proc.proc_start_ticks(worker) is not None and time.monotonic() < deadline:
        time.sleep(0.01)  # polling a condition, bounded by the deadline
    assert proc.proc_start_ticks(worker) is None
    assert json.loads((tmp_path / "server.pid").read_text())["exit"]["returncode"] == 0


def test_the_lock_module_renews_the_lease_of_its_run_only(tmp_path: Path) -> None:
    lease = lock(tmp_path / "sweep.lock")
    old = time.time() - 100
    os.utime(lease, (old, old))
    other = run_module(
        "specsweep_lock", {"state": "renewed", "path": str(lease), "owner": {"run_id": "run-2"}}
    )
    assert (other["renewed"], other["changed"]) == (False, False)
    assert lease.stat().st_mtime == pytest.approx(old)
    mine = run_module("specsweep_lock", {"state": "renewed", "path": str(lease), "owner": {"run_id": RUN}})
    assert mine["renewed"] is True and lease.stat().st_mtime > old + 90
