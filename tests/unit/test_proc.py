"""Process bookkeeping (plugins/module_utils/specsweep_proc.py) on real processes, sockets and files."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from plugin_loader import load_plugin

proc = load_plugin("plugins/module_utils/specsweep_proc.py")


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen]:
    """A child process that lives until the test ends (killed and reaped by its pid)."""
    child = subprocess.Popen(["sleep", "30"])
    yield child
    if child.poll() is None:
        child.kill()
    child.wait(timeout=10)


def test_start_ticks_of_a_live_child_match_proc_stat(sleeper: subprocess.Popen) -> None:
    ticks = proc.proc_start_ticks(sleeper.pid)
    # Field 22 of /proc/PID/stat; "sleep" has no spaces in its comm, so a plain split is safe here.
    expected = int(Path(f"/proc/{sleeper.pid}/stat").read_text().split()[21])
    assert ticks == expected
    assert ticks >= proc.proc_start_ticks(os.getpid()), "a child cannot start before its parent"
    assert proc.record_alive({"pid": sleeper.pid, "start_ticks": ticks}) is True


def test_start_ticks_are_none_once_the_child_is_killed_and_reaped(sleeper: subprocess.Popen) -> None:
    pid = sleeper.pid
    ticks = proc.proc_start_ticks(pid)
    sleeper.kill()
    sleeper.wait(timeout=10)
    assert proc.proc_start_ticks(pid) is None
    assert proc.record_alive({"pid": pid, "start_ticks": ticks}) is False


def test_start_ticks_are_none_for_a_zombie(sleeper: subprocess.Popen) -> None:
    sleeper.kill()
    # Not reaped yet: poll /proc with a deadline until the kernel marks it a zombie.
    stat = Path(f"/proc/{sleeper.pid}/stat")
    assert proc.wait_until(lambda: stat.read_text().rsplit(")", 1)[1].split()[0] == "Z", timeout_s=10)
    assert proc.proc_start_ticks(sleeper.pid) is None


def test_a_recycled_pid_is_not_our_server(sleeper: subprocess.Popen) -> None:
    ticks = proc.proc_start_ticks(sleeper.pid)
    assert ticks is not None
    assert proc.record_alive({"pid": sleeper.pid, "start_ticks": ticks - 1}) is False
    assert proc.record_alive({"pid": sleeper.pid}) is False
    assert proc.record_alive(None) is False


def test_proc_age_of_a_fresh_child_is_small_and_not_negative(sleeper: subprocess.Popen) -> None:
    age = proc.proc_age_s(proc.proc_start_ticks(sleeper.pid))
    assert 0.0 <= age < 60.0, age


def test_read_pidfile_accepts_records_and_refuses_anything_else(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"pid": 123, "start_ticks": 456, "port": 8080}))
    assert proc.read_pidfile(str(good)) == {"pid": 123, "start_ticks": 456, "port": 8080}
    for name, text in [("torn", '{"pid": 12'), ("list", "[1, 2]"), ("strpid", '{"pid": "123"}')]:
        (tmp_path / name).write_text(text)
        assert proc.read_pidfile(str(tmp_path / name)) is None, name
    assert proc.read_pidfile(str(tmp_path / "missing.json")) is None


def test_write_json_atomic_round_trips_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "server.pid"
    target.write_text("old")
    proc.write_json_atomic(str(target), {"pid": 7, "start_ticks": 9})
    assert json.loads(target.read_text()) == {"pid": 7, "start_ticks": 9}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["server.pid"]


def test_port_in_use_follows_a_real_listener() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        assert proc.port_in_use("127.0.0.1", port) is True
    # Closed: nothing accepts on that port any more (a bound-but-not-listening socket refuses too).
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", port))
        assert proc.port_in_use("127.0.0.1", port) is False


def test_tail_lines_returns_the_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert proc.tail_lines(str(log), 3) == ["line 97", "line 98", "line 99"]
    assert proc.tail_lines(str(log)) == [f"line {i}" for i in range(60, 100)]


def test_tail_lines_of_a_short_missing_or_undecodable_file(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"only\n\xffbad byte\n")
    assert proc.tail_lines(str(log), 5) == ["only", "\ufffdbad byte"]
    assert proc.tail_lines(str(tmp_path / "missing.log")) == []


def test_wait_until_returns_the_predicates_verdict() -> None:
    calls: list[int] = []

    def third_time() -> bool:
        calls.append(1)
        return len(calls) >= 3

    assert proc.wait_until(third_time, timeout_s=10, interval_s=0.001) is True
    assert len(calls) == 3
    assert proc.wait_until(lambda: False, timeout_s=0.0) is False


# --- process groups: proc_stat, group_members, stop_group --------------------------------------

# Stand-ins started in their own session (like the supervisor and the job wrapper): a process that
# writes "ready" once its SIGTERM handler is set (or ignored), then waits. "term": exit 7 on SIGTERM.
# "deaf": ignore SIGTERM. "parent": start a deaf child in the same group, print its pid, exit 0.
STAND_IN = r"""
import os, signal, subprocess, sys, time
mode = sys.argv[1]
if mode == "parent":
    child = subprocess.Popen([sys.executable, "-c", sys.argv[2], "deaf"])
    print(child.pid, flush=True)
    sys.exit(0)
if mode == "term":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))
else:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
while True:
    time.sleep(60)
"""


def group_leader(mode: str) -> subprocess.Popen:
    """STAND_IN in `mode`, leading a new session (and process group); returns once it is ready."""
    child = subprocess.Popen([sys.executable, "-c", STAND_IN, mode, STAND_IN], stdout=subprocess.PIPE,
                             text=True, start_new_session=True)  # fmt: skip
    assert child.stdout is not None
    first = child.stdout.readline().strip()
    assert first, "the stand-in printed nothing"
    child.first_line = first  # type: ignore[attr-defined]
    return child


def record_of(child: subprocess.Popen) -> dict:
    return {"pid": child.pid, "start_ticks": proc.proc_start_ticks(child.pid)}


@pytest.fixture
def reaped() -> Iterator[list[subprocess.Popen]]:
    """Stand-ins the test starts: their groups killed (whatever a failed test left) and reaped."""
    children: list[subprocess.Popen] = []
    yield children
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=10)


def test_proc_stat_reads_state_group_parent_and_times(reaped: list[subprocess.Popen]) -> None:
    child = group_leader("term")
    reaped.append(child)
    stat = proc.proc_stat(child.pid)
    assert stat is not None
    assert (stat["pid"], stat["pgrp"], stat["ppid"]) == (child.pid, child.pid, os.getpid())
    assert stat["state"] in ("S", "R"), stat
    assert stat["start_ticks"] == proc.proc_start_ticks(child.pid)
    fields = Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()
    assert stat["cpu_ticks"] >= int(fields[11]) + int(fields[12]) - 1  # it may have run since
    assert [m["pid"] for m in proc.group_members(child.pid)] == [child.pid]
    os.kill(child.pid, signal.SIGSTOP)
    assert proc.wait_until(lambda: proc.proc_stat(child.pid)["state"] == "T", timeout_s=10)
    os.kill(child.pid, signal.SIGCONT)


def test_stop_group_sigterm_reaches_a_running_group(reaped: list[subprocess.Popen]) -> None:
    child = group_leader("term")
    reaped.append(child)
    assert proc.stop_group(record_of(child), term_grace_s=30) is True
    # Its SIGTERM handler ran (exit 7): it was asked, not killed.
    assert child.wait(timeout=10) == 7


def test_stop_group_kills_a_stopped_process_without_waiting_the_grace(reaped: list[subprocess.Popen]) -> None:
    child = group_leader("term")
    reaped.append(child)
    os.kill(child.pid, signal.SIGSTOP)
    assert proc.wait_until(lambda: proc.proc_stat(child.pid)["state"] == "T", timeout_s=10)
    started = time.monotonic()
    assert proc.stop_group(record_of(child), term_grace_s=60) is True
    assert time.monotonic() - started < 15, "a stopped process must not wait out the grace"
    assert child.wait(timeout=10) == -signal.SIGKILL


def test_stop_group_kills_the_children_of_a_zombie_leader(reaped: list[subprocess.Popen]) -> None:
    leader = group_leader("parent")
    reaped.append(leader)
    orphan = int(leader.first_line)  # type: ignore[attr-defined]
    record = {"pid": leader.pid, "start_ticks": proc.proc_stat(leader.pid)["start_ticks"]}
    # The leader exits and is not reaped (a zombie); its child, deaf to SIGTERM, runs on in the group.
    assert proc.wait_until(lambda: proc.proc_stat(leader.pid)["state"] == "Z", timeout_s=10)
    assert [m["pid"] for m in proc.group_members(leader.pid)] == [orphan]
    assert proc.group_alive(record) is True
    assert proc.record_alive(record) is False  # the leader alone says nothing of its group
    started = time.monotonic()
    assert proc.stop_group(record, term_grace_s=60) is True
    assert time.monotonic() - started < 15
    assert proc.proc_start_ticks(orphan) is None


def test_a_server_of_a_reaped_supervisor_is_still_found_by_its_own_record(
    reaped: list[subprocess.Popen],
) -> None:
    leader = group_leader("parent")
    reaped.append(leader)
    orphan = int(leader.first_line)  # type: ignore[attr-defined]
    leader_ticks = proc.proc_stat(leader.pid)["start_ticks"]
    leader.wait(timeout=10)  # reaped: its pid proves nothing any more
    record = {"pid": leader.pid, "start_ticks": leader_ticks,
              "server_pid": orphan, "server_start_ticks": proc.proc_start_ticks(orphan)}  # fmt: skip
    assert proc.group_alive(record) is True
    assert proc.group_alive({**record, "server_start_ticks": record["server_start_ticks"] - 1}) is False
    assert proc.stop_group(record, term_grace_s=60) is True
    assert proc.proc_start_ticks(orphan) is None


def test_stop_group_leaves_a_group_with_another_start_time_alone(reaped: list[subprocess.Popen]) -> None:
    child = group_leader("term")
    reaped.append(child)
    stale = {"pid": child.pid, "start_ticks": proc.proc_start_ticks(child.pid) - 1}
    assert proc.group_alive(stale) is False
    assert proc.stop_group(stale, term_grace_s=1) is True
    assert child.poll() is None, "a process that is not the recorded one was signalled"


# /proc/net/tcp of this machine (2 listeners, a connection to the first) and a tcp6 listener on :::8080.
TCP_TABLE = (Path(__file__).parent / "fixtures" / "proc_net_tcp.txt").read_text()
TCP6_TABLE = (Path(__file__).parent / "fixtures" / "proc_net_tcp6.txt").read_text()
# A listener on a free port that says which, then waits for its stdin to close.
LISTENER = (
    "import socket, sys\n"
    "s = socket.create_server(('127.0.0.1', 0))\n"
    "print(s.getsockname()[1], flush=True)\n"
    "sys.stdin.read()\n"
)


def test_listening_inodes_are_the_listeners_of_that_port_not_its_connections() -> None:
    assert proc.listening_inodes(TCP_TABLE, 0x4967) == {1040330}
    assert proc.listening_inodes(TCP_TABLE, 2024) == {1079}
    assert proc.listening_inodes(TCP_TABLE, 0xA78A) == set()  # a client's port, not a listener
    assert proc.listening_inodes(TCP6_TABLE, 8080) == {52311}


def test_port_listeners_name_the_process_holding_a_real_listener() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", LISTENER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        assert proc.port_listeners(port) == {"pids": [child.pid], "hidden": False}
        assert proc.proc_name(child.pid) == Path(sys.executable).name[:15]
    finally:
        child.kill()
        child.wait()
    assert proc.port_listeners(port) == {"pids": [], "hidden": False}


def test_the_service_of_a_process_is_read_from_its_cgroup_in_v2_and_v1_layouts() -> None:
    unit = "/system.slice/specsweep-server-8080.service"
    assert proc.service_of(f"0::{unit}\n") == "specsweep-server-8080.service"
    assert proc.service_of(f"12:memory:{unit}\n1:name=systemd:{unit}\n") == "specsweep-server-8080.service"
    assert proc.service_of("0::/user.slice/user-0.slice/session-3.scope\n") is None
    assert proc.service_of("9:name=systemd:/\n8:pids:/\n") is None  # this machine: no systemd
