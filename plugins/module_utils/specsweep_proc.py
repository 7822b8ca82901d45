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

# Process states of /proc/PID/stat: exited but not reaped, and stopped (by a signal or a tracer).
DEAD_STATES = ("Z", "X")
STOPPED_STATES = ("T", "t")


def proc_stat(pid: int) -> dict | None:
    """State, parent, process group, CPU ticks (utime + stime) and start ticks of `pid`, zombies
    included; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    # comm (field 2) may contain spaces and parens: split after the last ')'; fields[0] is field 3.
    fields = stat.rsplit(")", 1)[1].split()
    return {
        "pid": pid,
        "state": fields[0],
        "ppid": int(fields[1]),
        "pgrp": int(fields[2]),
        "cpu_ticks": int(fields[11]) + int(fields[12]),
        "start_ticks": int(fields[19]),
    }


def proc_start_ticks(pid: int) -> int | None:
    """Kernel start time of `pid` in clock ticks, None if it is gone or a zombie."""
    stat = proc_stat(pid)
    return None if stat is None or stat["state"] in DEAD_STATES else stat["start_ticks"]


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


def group_members(pgid: int) -> list[dict]:
    """The live processes (zombies left out) of process group `pgid`, read from /proc."""
    members = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = proc_stat(int(name))
            if stat is not None and stat["pgrp"] == pgid and stat["state"] not in DEAD_STATES:
                members.append(stat)
    return members


def group_is_ours(record: dict) -> bool:
    """True while the recorded group may be signalled: its leader (running or a zombie, whose pid
    cannot be reused) or the server it recorded (`server_pid`, still in the group) has the
    recorded start time."""
    leader = proc_stat(record["pid"])
    if leader is not None and leader["start_ticks"] == record.get("start_ticks"):
        return True
    server = proc_stat(record["server_pid"]) if isinstance(record.get("server_pid"), int) else None
    return (
        server is not None
        and server["state"] not in DEAD_STATES
        and server["start_ticks"] == record.get("server_start_ticks")
        and server["pgrp"] == record["pid"]
    )


def group_alive(record: dict | None) -> bool:
    """True while a process of the recorded group (the leader, the server or a child) still runs."""
    return bool(record) and group_is_ours(record) and bool(group_members(record["pid"]))


def _signal_group(record: dict, *sigs: signal.Signals) -> bool:
    """Send `sigs` to the recorded group if it is still ours and alive; False when it is gone."""
    if not group_alive(record):
        return False
    try:
        for sig in sigs:
            os.killpg(record["pid"], sig)
    except ProcessLookupError:
        return False
    return True


def stop_group(record: dict, term_grace_s: float) -> bool:
    """Stop the recorded process group; True once none of it runs.

    The recorded process leads its own session, so its group holds its children too (the server
    under its supervisor, a client under its wrapper, SGLang's TP ranks). SIGTERM goes with SIGCONT
    (a stopped process only acts on SIGTERM once continued); SIGKILL follows after `term_grace_s`,
    or at once when a member is stopped (it hung) or the leader is a zombie or gone (its children
    are orphans nobody will stop). Only a group whose leader or server still has the recorded
    start time is signalled.
    """
    if not group_alive(record):
        return True
    leader = proc_stat(record["pid"])
    orphaned = leader is None or leader["state"] in DEAD_STATES
    stopped = any(m["state"] in STOPPED_STATES for m in group_members(record["pid"]))
    if not (orphaned or stopped) and _signal_group(record, signal.SIGTERM, signal.SIGCONT):
        wait_until(lambda: not group_alive(record), term_grace_s, interval_s=0.1)
    if _signal_group(record, signal.SIGKILL):
        wait_until(lambda: not group_alive(record), 10.0, interval_s=0.1)
    return not group_alive(record)


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


# /proc/net/tcp's state of a listening socket (include/net/tcp_states.h: TCP_LISTEN = 10).
TCP_LISTEN = "0A"


def listening_inodes(table: str, port: int) -> set[int]:
    """Socket inodes listening on TCP `port` (any address) in a /proc/net/tcp or tcp6 table."""
    inodes = set()
    for line in table.splitlines()[1:]:
        fields = line.split()
        # sl, local_address (hex address:hex port), rem_address, st, queues, tr, retrnsmt, uid, timeout, inode
        if len(fields) > 9 and fields[3] == TCP_LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
            inodes.add(int(fields[9]))
    return inodes


def port_listeners(port: int) -> dict:
    """Who listens on TCP `port` here: {"pids": the processes holding such a socket (a forked child
    may share it), "hidden": true when one is held by a process whose descriptors this user cannot read}."""
    inodes: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                inodes |= listening_inodes(f.read(), port)
        except OSError:
            continue
    wanted = {f"socket:[{inode}]" for inode in inodes}
    pids, seen = [], set()
    for name in os.listdir("/proc") if wanted else []:
        if not name.isdigit():
            continue
        try:
            links = {os.readlink(f"/proc/{name}/fd/{fd}") for fd in os.listdir(f"/proc/{name}/fd")}
        except OSError:
            continue  # gone, or not ours to read
        if links & wanted:
            pids.append(int(name))
            seen |= links & wanted
    return {"pids": sorted(pids), "hidden": seen != wanted}


def proc_name(pid: int) -> str:
    """The command name of `pid` (/proc/<pid>/comm), '?' once it is gone."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return "?"


def service_of(cgroup: str) -> str | None:
    """The systemd service a /proc/<pid>/cgroup text places its process in, None outside one."""
    paths = [line.split(":", 2)[-1] for line in cgroup.splitlines()]
    units = [part for path in paths for part in path.split("/") if part.endswith(".service")]
    return units[-1] if units else None


def proc_unit(pid: int) -> str | None:
    """The systemd service `pid` runs in, None outside one (or once it is gone)."""
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8", errors="replace") as f:
            return service_of(f.read())
    except OSError:
        return None
