"""The host lock (plugins/modules/specsweep_lock.py) with a real process on the engine's port: what an
ended run left is named and kept, a stranger's is named, and neither is stopped."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from module_runner import run_module
from plugin_loader import load_plugin

from analysis.sweep import identity

proc = load_plugin("plugins/module_utils/specsweep_proc.py")

# A server stand-in in its own group (as under its supervisor): listens on a free port, says which.
LISTENER = (
    "import socket, sys\n"
    "s = socket.create_server(('127.0.0.1', 0))\n"
    "print(s.getsockname()[1], flush=True)\n"
    "sys.stdin.read()\n"
)
OWNER = {"run_id": "run-2", "sweep_id": "next", "pid": 1, "start_ticks": 1}


@pytest.fixture
def listener() -> Iterator[tuple[subprocess.Popen, int]]:
    """A listening process (its own session and group) and its port; killed and reaped at the end."""
    child = subprocess.Popen(
        [sys.executable, "-c", LISTENER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    assert child.stdout is not None
    yield child, int(child.stdout.readline())
    child.kill()
    child.wait(timeout=10)


def acquire(path: Path, port: int, **extra: str) -> dict:
    return run_module("specsweep_lock", {"state": "acquired", "path": str(path), "owner": OWNER, "port": port,
                                         **extra})  # fmt: skip


def test_a_listener_an_ended_run_recorded_is_named_and_its_lock_kept(
    tmp_path: Path, listener: tuple[subprocess.Popen, int]
) -> None:
    child, port = listener
    # The lock of a run whose controller died, as its server's launch recorded the server's group in it.
    ended = {"run_id": "run-1", "sweep_id": "M", "controller": "ctl", "pid": 4242, "lease_s": 30,
             "server": {"pid": child.pid, "start_ticks": proc.proc_start_ticks(child.pid)}}  # fmt: skip
    path = tmp_path / "sweep.lock"
    path.write_text(json.dumps(ended))
    result = acquire(path, port, steal_from="run-1")
    assert result["acquired"] is False and "failed" not in result, result
    held = result["port_holder"]
    assert (held["run_id"], held["sweep_id"], held["port"]) == ("run-1", "M", port), held
    # The group's leader (its supervisor, here the listener itself) still runs: the lease stops it.
    assert held["supervised"] is True, held
    name = proc.proc_name(child.pid)
    assert held["processes"] == [{"pid": child.pid, "name": name, "unit": None, "started_by": "server"}]
    assert json.loads(path.read_text()) == ended, "the ended run's lock (its record) is kept"
    assert child.poll() is None, "nothing is stopped"
    said = identity.port_refusal("h1", held, result["holder"])
    assert said.startswith(f"h1: port {port} is held by pid {child.pid} ({name}), the server")
    assert "that run run-1 of sweep M started here and did not stop" in said and "ctl pid 4242" in said
    assert "Its supervisor stops it once that run's lease (30 s) runs out; to free the host now: " in said
    assert "`ansible-playbook playbooks/release.yml -e release=M -e target=h1`" in said
    assert f"`kill {child.pid}` on h1" in said


def test_a_resume_of_the_same_sweep_takes_its_own_leftover_over(
    tmp_path: Path, listener: tuple[subprocess.Popen, int]
) -> None:
    child, port = listener
    # The controller of sweep "next" died; its resume (run-2 of the same sweep) takes the host: its
    # launch stops that sweep's server by the sweep's own pidfile. Nothing is stopped here.
    ended = {"run_id": "run-1", "sweep_id": "next", "controller": "ctl", "pid": 4242, "lease_s": 30,
             "server": {"pid": child.pid, "start_ticks": proc.proc_start_ticks(child.pid)}}  # fmt: skip
    path = tmp_path / "sweep.lock"
    path.write_text(json.dumps(ended))
    result = acquire(path, port, steal_from="run-1")
    assert result["acquired"] is True and "port_holder" not in result, result
    assert json.loads(path.read_text())["run_id"] == "run-2"
    assert child.poll() is None, "nothing is stopped"


def test_a_strangers_listener_is_named_and_no_lock_taken(
    tmp_path: Path, listener: tuple[subprocess.Popen, int]
) -> None:
    child, port = listener
    path = tmp_path / "sweep.lock"
    result = acquire(path, port)
    assert result["acquired"] is False and not path.exists(), result
    held = result["port_holder"]
    assert held["run_id"] is None and [p["started_by"] for p in held["processes"]] == [None], held
    said = identity.port_refusal("h1", held, {})
    assert f"h1: port {port} is held by pid {child.pid}" in said
    assert "a process no specsweep run recorded here; nothing was launched and it was left untouched" in said
    assert child.poll() is None


def test_a_free_port_takes_the_lock_and_a_dead_runs_lock_over(tmp_path: Path) -> None:
    with proc.socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # closed below: free
    path = tmp_path / "sweep.lock"
    path.write_text(json.dumps({"run_id": "run-1", "sweep_id": "M"}))
    result = acquire(path, port, steal_from="run-1")
    assert result["acquired"] is True and "port_holder" not in result, result
    assert json.loads(path.read_text())["run_id"] == "run-2"


def test_a_stranger_in_a_systemd_service_is_named_with_the_command_that_stops_it() -> None:
    process = {"pid": 77, "name": "python3", "unit": "specsweep-server-8080.service", "started_by": None}
    held = {"port": 8080, "hidden": False, "run_id": None, "processes": [process]}
    said = identity.port_refusal("h1", held, {})
    assert said.startswith("h1: port 8080 is held by pid 77 (python3, in specsweep-server-8080.service), a ")
    assert "Stop `systemctl stop specsweep-server-8080.service`, or give the engine another port" in said
