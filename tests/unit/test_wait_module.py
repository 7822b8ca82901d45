"""plugins/modules/specsweep_wait.py against real stand-in servers launched by specsweep_server: a
stopped or silent server is hung, a busy one is not, an exit names its status, a ready one passes."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from memcg import HOG, memory_cgroup
from module_runner import module_utils, run_module

proc = module_utils("specsweep_proc")

# Stand-in servers by mode: quiet (no output, no CPU), chatty (a log line every 0.2 s), busy (CPU,
# no output), exit (a usage error), http (answers health and generation), error (healthy, but answers
# generation with the same 500), error-changing (a 500 whose body changes), hog (allocates once told).
SERVER = r"""
import http.server, os, sys, time
mode, port = sys.argv[1], int(sys.argv[2])
if mode == "quiet":
    time.sleep(600)
while mode == "chatty":
    print("loading", time.time(), flush=True)
    time.sleep(0.2)
while mode == "busy":
    sum(range(100000))
if mode == "hog":  # loading "weights" once the test has put it in a small memory cgroup
    while not os.path.exists(os.environ["HOG_GO"]):
        time.sleep(0.05)
    exec(os.environ["HOG"])
if mode == "exit":
    print("error: unrecognized arguments: --foo", flush=True)
    sys.exit(2)

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.answer()
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.answer()
    def answer(self):
        status, body = 200, b'{"status": "ok", "content": "x"}'
        if self.command == "POST" and mode.startswith("error"):
            status, body = 500, b'{"error": {"code": 500, "message": "CUDA error: illegal memory access"}}'
            body += str(time.monotonic()).encode() if mode == "error-changing" else b""
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

print("listening", flush=True)
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[[str], dict[str, Any]]]:
    """Start the stand-in in a mode with specsweep_server; returns the wait arguments for it and
    the launch record (`record`). Its group is killed at the end."""
    pidfile = tmp_path / "server.pid"

    def start(mode: str) -> dict[str, Any]:
        port = free_port()
        log = tmp_path / "sweep" / "s1.log"
        env = {"HOG_GO": str(tmp_path / "go"), "HOG": HOG}
        up = run_module("specsweep_server", {"state": "started", "argv": [sys.executable, "-c", SERVER, mode,
                        str(port)], "env": env, "pidfile": str(pidfile), "log_path": str(log),
                        "port": port})  # fmt: skip
        assert up["changed"] is True, up
        url = f"http://127.0.0.1:{port}"
        return {"record": up, "engine": "llama_cpp", "url": url, "pidfile": str(pidfile),
                "log_path": str(log), "timeout_s": 120, "slice_s": 20, "poll_interval_s": 0.1}  # fmt: skip

    yield start
    record = proc.read_pidfile(str(pidfile))
    if record is not None and proc.group_alive(record):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(record["pid"], signal.SIGKILL)


def wait(args: dict[str, Any], **extra: Any) -> tuple[dict[str, Any], float]:
    """The wait module's result and how long the call took."""
    begun = time.monotonic()
    result = run_module("specsweep_wait", {k: v for k, v in {**args, **extra}.items() if k != "record"})
    return result, time.monotonic() - begun


def test_a_stopped_server_is_hung_at_once(launch: Callable[[str], dict[str, Any]]) -> None:
    args = launch("quiet")
    server = args["record"]["server_pid"]
    os.kill(server, signal.SIGSTOP)
    assert proc.wait_until(lambda: proc.proc_stat(server)["state"] == "T", 10)
    result, took = wait(args)
    assert (result.get("failed"), result.get("cause"), result.get("process_state")) == (True, "hung", "T"), (
        result
    )
    assert result["msg"].startswith(f"server stopped (state T, e.g. SIGSTOP) while loading: pid {server}, ")
    assert took < 10, f"took {took:.1f} s"


def test_a_silent_idle_server_is_hung_after_stall_s(launch: Callable[[str], dict[str, Any]]) -> None:
    args = launch("quiet")
    result, took = wait(args, stall_s=2)
    assert (result.get("failed"), result.get("cause")) == (True, "hung"), result
    assert re.match(
        r"server hung while loading: no log output and no CPU for [2-4] s \(stall_s 2\), ", result["msg"]
    )
    assert 2 <= result["stalled_s"] < 5 and took < 10, (result, took)


@pytest.mark.parametrize("mode", ["chatty", "busy"])
def test_a_server_that_logs_or_computes_is_not_hung(
    launch: Callable[[str], dict[str, Any]], mode: str
) -> None:
    args = launch(mode)
    result, _ = wait(args, stall_s=2, slice_s=4)
    assert not result.get("failed") and result["ready"] is False, result


def test_the_stall_is_measured_across_calls(launch: Callable[[str], dict[str, Any]], tmp_path: Path) -> None:
    args = launch("quiet")
    first, _ = wait(args, stall_s=6, slice_s=4)
    assert not first.get("failed") and first["ready"] is False, first
    state = json.loads((tmp_path / "sweep" / "s1.log.progress").read_text())
    assert state["pid"] == args["record"]["server_pid"]
    second, took = wait(args, stall_s=6)
    assert second.get("cause") == "hung" and second["stalled_s"] >= 6, second
    # The second call alone has not watched for 6 s: it continued the first call's measure.
    assert took < 6, f"the second call took {took:.1f} s"


def test_an_exit_while_loading_names_the_cause_and_the_exit_status(
    launch: Callable[[str], dict[str, Any]],
) -> None:
    args = launch("exit")
    result, _ = wait(args)
    assert (result.get("failed"), result.get("cause")) == (True, "bad_argument"), result
    assert result["msg"] == (
        "server exited while loading (bad_argument, exit status 2): error: unrecognized arguments: --foo"
    )
    assert result["exit"]["returncode"] == 2


def test_a_server_killed_while_loading_names_the_signal(launch: Callable[[str], dict[str, Any]]) -> None:
    args = launch("quiet")
    os.kill(args["record"]["server_pid"], signal.SIGKILL)
    result, took = wait(args)
    assert result.get("failed") is True and "signal 9: SIGKILL" in result["msg"], result
    assert result["exit"]["signal_name"] == "SIGKILL" and took < 10


def test_a_server_the_oom_killer_ends_while_loading_is_oom_killed_with_the_kernels_line(
    launch: Callable[[str], dict[str, Any]], tmp_path: Path
) -> None:
    args = launch("hog")
    pid = args["record"]["server_pid"]
    group = memory_cgroup(f"specsweep-test-{os.getpid()}")
    try:
        (group / "cgroup.procs").write_text(str(pid))
        (tmp_path / "go").touch()
        result, took = wait(args)
    finally:
        proc.wait_until(lambda: not (group / "cgroup.procs").read_text().strip(), 10.0)
        group.rmdir()
    assert (result.get("failed"), result.get("cause")) == (True, "oom_killed"), result
    said = (
        rf"server exited while loading \(oom_killed, signal 9: SIGKILL\): the kernel: .*Killed process {pid} "
    )
    assert re.match(said, result["msg"]), result["msg"]
    assert took < 30, took


def test_a_ready_server_passes_and_the_call_renews_the_lease(
    launch: Callable[[str], dict[str, Any]], tmp_path: Path
) -> None:
    args = launch("http")
    lease = tmp_path / "sweep.lock"
    lease.write_text(json.dumps({"run_id": "run-1"}))
    old = time.time() - 100
    os.utime(lease, (old, old))
    result, _ = wait(args, lease_path=str(lease), run_id="run-1")
    assert result.get("ready") is True and not result.get("failed"), result
    assert lease.stat().st_mtime > old + 90
    assert not (tmp_path / "sweep" / "s1.log.progress").exists()


def test_the_same_5xx_to_the_proving_generation_fails_within_seconds_with_its_body(
    launch: Callable[[str], dict[str, Any]],
) -> None:
    args = launch("error")
    result, took = wait(args)
    assert (result.get("failed"), result.get("cause")) == (True, "generation_error"), result
    body = '{"error": {"code": 500, "message": "CUDA error: illegal memory access"}}'
    assert result["response"] == body
    assert re.fullmatch(
        r"server healthy but its generation answered 500 \d+ times in 3\.\d s, the same each time: "
        + re.escape(body),
        result["msg"],
    ), result["msg"]
    assert took < 10, f"took {took:.1f} s (timeout_s 120)"


def test_5xx_answers_whose_body_changes_fail_within_seconds_quoting_one(
    launch: Callable[[str], dict[str, Any]],
) -> None:
    # A time in every body, as a request id would be: the status decides, not the body.
    args = launch("error-changing")
    result, took = wait(args)
    assert (result.get("failed"), result.get("cause")) == (True, "generation_error"), result
    assert re.fullmatch(
        r"server healthy but its generation answered 500 \d+ times in 3\.\d s, "
        r"the body differing \(the last\): "
        + re.escape('{"error": {"code": 500, "message": "CUDA error: illegal memory access"}}')
        + r"[\d.]+",
        result["msg"],
    ), result["msg"]
    assert took < 10, f"took {took:.1f} s (timeout_s 120)"
