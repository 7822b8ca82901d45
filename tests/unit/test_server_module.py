"""plugins/modules/specsweep_server.py run as on a host: launch under the supervisor, stop, replace,
the lease check at launch, log retention (keep_runs), and one round trip through ansible-playbook."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from local_play import run_local_play
from module_runner import module_utils, run_module

proc = module_utils("specsweep_proc")

# Prints where it runs and what it was given, then waits.
SERVER = (
    "import os, sys, time\nprint('up', os.getcwd(), os.environ.get('FOO'), flush=True)\ntime.sleep(600)\n"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server_args(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Arguments of a started stand-in server; whatever a test leaves running is killed at the end."""
    args = {
        "state": "started",
        "argv": [sys.executable, "-c", SERVER],
        "env": {"FOO": "bar"},
        "pidfile": str(tmp_path / "run" / "server-1.pid"),
        "log_path": str(tmp_path / "run" / "sweep-b" / "s1.log"),
        "chdir": str(tmp_path),
        "port": free_port(),
        "stop_timeout_s": 20,
    }
    yield args
    record = proc.read_pidfile(args["pidfile"])
    if record is not None and proc.group_alive(record):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(record["pid"], signal.SIGKILL)


def test_started_runs_argv_under_its_supervisor_and_stopped_ends_both(
    server_args: dict[str, Any], tmp_path: Path
) -> None:
    up = run_module("specsweep_server", server_args)
    assert up["changed"] is True and not up.get("failed"), up
    assert up["server_pid"] != up["pid"]
    assert proc.proc_stat(up["server_pid"])["pgrp"] == up["pid"]
    cmdline = Path(f"/proc/{up['server_pid']}/cmdline").read_bytes().split(b"\0")[:-1]
    assert [a.decode() for a in cmdline] == server_args["argv"]
    assert proc.wait_until(lambda: "up" in Path(server_args["log_path"]).read_text(), 10)
    assert Path(server_args["log_path"]).read_text() == f"up {tmp_path} bar\n"
    begun = time.monotonic()
    down = run_module("specsweep_server", {**server_args, "state": "stopped"})
    assert down["changed"] is True and down["exit"]["signal_name"] == "SIGTERM", down
    assert time.monotonic() - begun < 15
    assert proc.proc_start_ticks(up["server_pid"]) is None and proc.proc_start_ticks(up["pid"]) is None
    assert not Path(server_args["pidfile"]).exists()
    again = run_module("specsweep_server", {**server_args, "state": "stopped"})
    assert again["changed"] is False


def test_the_same_argv_keeps_the_server_and_replace_restarts_it(server_args: dict[str, Any]) -> None:
    first = run_module("specsweep_server", server_args)
    same = run_module("specsweep_server", server_args)
    assert (same["changed"], same["server_pid"]) == (False, first["server_pid"])
    fresh = run_module("specsweep_server", {**server_args, "replace": True})
    assert fresh["changed"] is True and fresh["server_pid"] != first["server_pid"]
    assert proc.proc_start_ticks(first["server_pid"]) is None
    assert proc.group_alive(proc.read_pidfile(server_args["pidfile"])) is True


def test_a_stopped_server_is_stopped_without_waiting_the_grace(server_args: dict[str, Any]) -> None:
    up = run_module("specsweep_server", {**server_args, "stop_timeout_s": 60})
    os.kill(up["server_pid"], signal.SIGSTOP)
    assert proc.wait_until(lambda: proc.proc_stat(up["server_pid"])["state"] == "T", 10)
    begun = time.monotonic()
    down = run_module("specsweep_server", {**server_args, "state": "stopped", "stop_timeout_s": 60})
    assert down["changed"] is True and time.monotonic() - begun < 20, down
    assert proc.proc_start_ticks(up["server_pid"]) is None


def test_a_foreign_process_on_the_port_is_left_alone(server_args: dict[str, Any]) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", server_args["port"]))
        listener.listen(1)
        result = run_module("specsweep_server", server_args)
        assert proc.port_in_use("127.0.0.1", server_args["port"])
    assert (result.get("failed"), result.get("cause")) == (True, "port_in_use"), result
    assert not Path(server_args["pidfile"]).exists()


def test_a_command_that_cannot_start_fails_with_its_reason(server_args: dict[str, Any]) -> None:
    result = run_module("specsweep_server", {**server_args, "argv": ["/nonexistent/llama-server"]})
    assert (result.get("failed"), result.get("cause")) == (True, "launch_failed"), result
    assert "No such file or directory: '/nonexistent/llama-server'" in result["msg"], result["msg"]


def test_a_launch_renews_the_lease_and_refuses_a_lock_of_another_run(
    server_args: dict[str, Any], tmp_path: Path
) -> None:
    lease = tmp_path / "run" / "sweep.lock"
    lease.parent.mkdir(parents=True)
    proc.write_json_atomic(str(lease), {"run_id": "run-2"})
    old = time.time() - 100
    os.utime(lease, (old, old))
    leased = {**server_args, "lease_path": str(lease), "run_id": "run-1", "lease_s": 30}
    refused = run_module("specsweep_server", leased)
    assert (refused.get("failed"), refused.get("cause")) == (True, "lease_lost"), refused
    assert not Path(server_args["pidfile"]).exists()
    assert lease.stat().st_mtime == pytest.approx(old), "another run's lease was renewed"

    proc.write_json_atomic(str(lease), {"run_id": "run-1"})
    os.utime(lease, (old, old))
    up = run_module("specsweep_server", leased)
    assert up["changed"] is True and (up["lease_path"], up["lease_s"], up["run_id"]) == (
        str(lease),
        30,
        "run-1",
    )
    assert lease.stat().st_mtime > old + 90


def suite_logs(folder: Path, mtime: float, *names: str) -> Path:
    """A sweep log folder holding `names`, its mtime set to `mtime`."""
    folder.mkdir(parents=True)
    for name in names:
        (folder / name).write_text("x")
    os.utime(folder, (mtime, mtime))
    return folder


def test_keep_runs_prunes_the_oldest_sweep_logs_and_nothing_else(
    server_args: dict[str, Any], tmp_path: Path
) -> None:
    runs = tmp_path / "run"
    now = time.time()
    newest = suite_logs(runs / "sweep-a", now - 100, "s1.log", "s1.log.progress", "s1.bench.json")
    older = suite_logs(runs / "sweep-0", now - 200, "s1.log", "s1.bench.json.job", "s1.bench.json.stdout",
                       "s1.bench.json.stderr", "s1.bench.json.rc", "s2.bench_serving.jsonl")  # fmt: skip
    oldest = suite_logs(runs / "sweep-z", now - 300, "baseline.log")
    foreign = suite_logs(runs / "notes", now - 400, "s1.log", "todo.txt")
    tools = suite_logs(runs / "bench", now - 500, "specsweep_bench.py", "code.jsonl")
    up = run_module("specsweep_server", {**server_args, "keep_runs": 2, "runs_dir": str(runs)})
    # The current sweep (sweep-b, being launched) and the newest other one are kept.
    assert sorted(up["pruned_logs"]) == sorted([str(older), str(oldest)]), up
    assert sorted(p.name for p in runs.iterdir() if p.is_dir()) == ["bench", "notes", "sweep-a", "sweep-b"]
    assert newest.exists() and foreign.exists() and tools.exists()
    assert Path(server_args["log_path"]).exists()


def test_keep_runs_below_one_is_refused(server_args: dict[str, Any], tmp_path: Path) -> None:
    result = run_module("specsweep_server", {**server_args, "keep_runs": 0, "runs_dir": str(tmp_path)})
    assert result.get("failed") is True and "keep_runs must be 1 or more" in result["msg"], result
    assert not Path(server_args["pidfile"]).exists()


def test_the_supervisor_starts_from_inside_ansiballz(server_args: dict[str, Any], tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    stop = {k: server_args[k] for k in ("pidfile", "port")}
    play = run_local_play(tmp_path, [
        {"specsweep_server": server_args, "register": "up"},
        {"specsweep_server": {**stop, "state": "stopped"}, "register": "down"},
        {"ansible.builtin.copy": {"dest": str(results), "mode": "0644",
                                  "content": "{{ {'up': up, 'down': down} | to_json }}"}},
    ])  # fmt: skip
    assert play.returncode == 0, play.stdout[-3000:]
    r = json.loads(results.read_text())
    assert r["up"]["changed"] is True and r["up"]["server_pid"] != r["up"]["pid"]
    assert r["down"]["exit"]["signal_name"] == "SIGTERM", r["down"]
    assert proc.proc_start_ticks(r["up"]["server_pid"]) is None
