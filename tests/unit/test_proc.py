"""Process bookkeeping (plugins/module_utils/specsweep_proc.py) on real processes, sockets and files."""

from __future__ import annotations

import json
import os
import socket
import subprocess
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
