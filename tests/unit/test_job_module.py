"""plugins/modules/specsweep_job.py: through a real ansible-playbook on this machine, a detached
client followed in slices, its result, its failure, and a stale job replaced; run as on a host, the
server under test watched (server_exited) and the lease renewed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from local_play import run_local_play
from module_runner import module_utils, run_module

proc = module_utils("specsweep_proc")

# A client that reports on stderr, works a while, then prints its document.
CLIENT = (
    "import sys, time\n"
    "print('repeat 1/2', file=sys.stderr, flush=True)\n"
    "time.sleep(float(sys.argv[1]))\n"
    "print('repeat 2/2', file=sys.stderr, flush=True)\n"
    "print('{\"ok\": 1}')\n"
    "sys.exit(int(sys.argv[2]))\n"
)


def job(
    path: Path, token: str, seconds: float, name: str, rc: int = 0, follow: bool = False
) -> dict[str, Any]:
    """A specsweep_job task running CLIENT, registered as `name`; `follow`: repeat it until done."""
    argv = [sys.executable, "-c", CLIENT, str(seconds), str(rc)]
    task: dict[str, Any] = {"specsweep_job": {"argv": argv, "path": str(path), "token": token, "slice_s": 1},
                            "register": name, "ignore_errors": rc != 0}  # fmt: skip
    if follow:
        task.update(until=f"{name} is failed or {name}.done", retries=60, delay=0)
    return task


def test_a_job_reports_progress_then_its_output_keeps_a_failure_and_replaces_a_stale_job(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bench.json"
    results = tmp_path / "results.json"
    proc = run_local_play(tmp_path, [
        job(path, "run1", 4, "first"),
        job(path, "run1", 4, "second", follow=True),
        job(path, "run2", 0.1, "third", rc=3, follow=True),
        job(path, "run3", 60, "fourth"),
        job(path, "run4", 0.1, "fifth", follow=True),
        {"ansible.builtin.copy": {"dest": str(results), "mode": "0644", "content": "{{ found | to_json }}"},
         "vars": {"names": ["first", "second", "third", "fourth", "fifth"],
                  "found": "{{ dict(names | zip(names | map('extract', vars))) }}"}},
    ])  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    r = json.loads(results.read_text())
    # A slice ends with the client still running: its last stderr line is the progress.
    assert (r["first"]["done"], r["first"]["progress"]) == (False, "repeat 1/2")
    # The same token follows that job (same pid) to its end instead of starting another.
    assert (r["second"]["done"], r["second"]["rc"], r["second"]["pid"]) == (True, 0, r["first"]["pid"])
    assert r["second"]["stdout"] == '{"ok": 1}'
    assert r["second"]["stderr"].splitlines() == ["repeat 1/2", "repeat 2/2"]
    # A non-zero exit fails like command, keeping what the client printed.
    assert (r["third"]["failed"], r["third"]["rc"], r["third"]["stdout"]) == (True, 3, '{"ok": 1}')
    # Another token replaces a job still running: the old one is stopped.
    assert r["fourth"]["done"] is False and r["fifth"]["rc"] == 0
    stale = Path(f"/proc/{r['fourth']['pid']}/cmdline")
    assert not stale.exists() or "repeat 1/2" not in stale.read_text(errors="replace")


# --- the server under test, watched while the client runs (run as on a host, no play) -----------

# A client that has measured a little when it is followed, then waits until the file sys.argv[1]
# exists and fails as a client whose server went away does.
PARTIAL_CLIENT = (
    "import os, sys, time\n"
    "print('{\"runs\": [1]', flush=True)\n"
    "print('repeat 1/3', file=sys.stderr, flush=True)\n"
    "while not os.path.exists(sys.argv[1]):\n"
    "    time.sleep(0.05)\n"
    "print('ConnectionRefusedError: [Errno 111] Connection refused', file=sys.stderr)\n"
    "sys.exit(1)\n"
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A stand-in server launched by specsweep_server (its record); its group is killed at the end."""
    record = run_module("specsweep_server", {
        "state": "started", "argv": [sys.executable, "-c", "print('server up', flush=True)\nimport time\n"
                                     "time.sleep(600)"],
        "pidfile": str(tmp_path / "server.pid"), "log_path": str(tmp_path / "s1.log"), "port": 1,
    })  # fmt: skip
    assert record["changed"] is True, record
    yield record
    for pid in (record["pid"], record["server_pid"]):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


def watched_job(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    """A specsweep_job call running PARTIAL_CLIENT (failing once tmp_path/fail exists), watching the
    server of `server`."""
    return run_module("specsweep_job", {
        "argv": [sys.executable, "-c", PARTIAL_CLIENT, str(tmp_path / "fail")],
        "path": str(tmp_path / "s1.bench.json"), "token": "run-1/s1",
        "server_pidfile": str(tmp_path / "server.pid"), "server_log": str(tmp_path / "s1.log"), **extra,
    })  # fmt: skip


def test_a_server_killed_during_the_benchmark_fails_the_job_as_server_exited(
    tmp_path: Path, server: dict[str, Any]
) -> None:
    first = watched_job(tmp_path, slice_s=1)
    assert (first["done"], first["progress"]) == (False, "repeat 1/3"), first
    os.kill(server["server_pid"], signal.SIGKILL)
    begun = time.monotonic()
    result = watched_job(tmp_path, slice_s=30)
    assert time.monotonic() - begun < 10
    assert (result.get("failed"), result.get("cause")) == (True, "server_exited"), result
    assert result["msg"] == "server exited (signal 9: SIGKILL) during benchmark, repeat 1/3"
    assert result["exit"]["signal"] == 9 and result["log_tail"] == ["server up"]
    # What the client printed before it was stopped, and it was stopped.
    assert (result["stdout"], result["stderr"]) == ('{"runs": [1]', "repeat 1/3")
    assert proc.proc_start_ticks(first["pid"]) is None


def test_a_client_failing_after_its_server_died_names_the_server(
    tmp_path: Path, server: dict[str, Any]
) -> None:
    first = watched_job(tmp_path, slice_s=1)
    assert first["done"] is False, first
    os.kill(server["server_pid"], signal.SIGKILL)
    (tmp_path / "fail").touch()
    # The client fails before the next call looks: its exit status is there, the server gone.
    assert proc.wait_until((tmp_path / "s1.bench.json.rc").exists, 10)
    result = watched_job(tmp_path, slice_s=30)
    assert (result.get("failed"), result.get("cause")) == (True, "server_exited"), result
    assert result["msg"] == "server exited (signal 9: SIGKILL) during benchmark, repeat 1/3"
    assert result["stderr"].splitlines()[-1] == "ConnectionRefusedError: [Errno 111] Connection refused"


def test_a_job_beside_a_running_server_ends_normally_and_renews_the_lease(
    tmp_path: Path, server: dict[str, Any]
) -> None:
    lease = tmp_path / "sweep.lock"
    lease.write_text(json.dumps({"run_id": "run-1"}))
    old = time.time() - 100
    os.utime(lease, (old, old))
    result = run_module("specsweep_job", {
        "argv": [sys.executable, "-c", CLIENT, "0.1", "0"], "path": str(tmp_path / "s1.bench.json"),
        "token": "run-1/s1", "slice_s": 30, "server_pidfile": str(tmp_path / "server.pid"),
        "lease_path": str(lease), "run_id": "run-1",
    })  # fmt: skip
    assert (result.get("failed"), result["rc"], result["stdout"]) == (None, 0, '{"ok": 1}'), result
    assert lease.stat().st_mtime > old + 90
    assert proc.group_alive(proc.read_pidfile(str(tmp_path / "server.pid"))) is True
