"""Process bookkeeping shared by the launch and wait modules (stdlib only).

A pidfile records the pid *and* its kernel start time, so a recycled pid is
never mistaken for a server this suite started.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time


def proc_start_ticks(pid: int) -> int | None:
    """Kernel start time of `pid` in clock ticks, None if it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    # comm (field 2) may contain spaces and parens: split after the last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def proc_age_s(start_ticks: int) -> float:
    """Seconds since a process with this start time began."""
    with open("/proc/uptime", encoding="ascii") as f:
        uptime = float(f.read().split()[0])
    return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))


def read_pidfile(path: str) -> dict | None:
    """The pidfile's record, or None when there is none (or it is unreadable)."""
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("pid"), int) else None


def record_alive(record: dict | None) -> bool:
    """True when the recorded process still runs (same pid and same start time)."""
    if not record:
        return False
    return proc_start_ticks(record["pid"]) == record.get("start_ticks")


def write_json_atomic(path: str, data: dict) -> None:
    """Write JSON via a temp file and rename, so readers never see half a file."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def port_in_use(host: str, port: int) -> bool:
    """True when something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def wait_until(predicate, timeout_s: float, interval_s: float = 0.05) -> bool:
    """Poll `predicate` until it is true or the deadline passes; returns its last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


def stop_group(record: dict, term_grace_s: float) -> bool:
    """SIGTERM the recorded process group, SIGKILL it after `term_grace_s`; True once it is gone.

    The recorded process leads its own session, so its group holds its children too (a client
    under its wrapper, SGLang's TP ranks). Only a record that is alive (same pid and start time)
    is signalled.
    """
    for sig, grace in ((signal.SIGTERM, term_grace_s), (signal.SIGKILL, 10.0)):
        if not record_alive(record):
            break
        try:
            os.killpg(record["pid"], sig)
        except ProcessLookupError:
            break
        wait_until(lambda: not record_alive(record), grace)
    return not record_alive(record)


def tail_lines(path: str, count: int = 40) -> list[str]:
    """The last `count` lines of a log file (empty when it does not exist)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    return data.splitlines()[-count:]
