"""What the host's kernel said about a server that died: its OOM killer's line (stdlib only).

A server the OOM killer ends dies of SIGKILL and writes nothing; only the kernel's log names why.
mm/oom_kill.c (__oom_kill_process) writes, since Linux 4.19 with the rss fields after it:
  "<message>: Killed process <pid> (<comm>) total-vm:...kB, anon-rss:...kB, ..."
where <message> is "Out of memory", "Memory cgroup out of memory" or
"Out of memory (oom_kill_allocating_task)"; older kernels wrote "Killed process <pid> (<comm>) ...".
The pid is the one in the kernel's first pid namespace: a server in a container of its own pid
namespace is not matched, and its death stays `server_exited`.
"""

from __future__ import annotations

import errno
import os
import re
import subprocess

OOM_KILLED = re.compile(r"Killed process (\d+) \(([^)]*)\)")
# A /dev/kmsg record: "<syslog prefix>,<seq>,<usec since boot>,<flags>[,...];<message>".
KMSG_RECORD = re.compile(r"^\d+,\d+,(\d+),[^;]*;(.*)$")
# A `journalctl -k -o short-monotonic` line: "[  123.456789] <host> kernel: <message>".
JOURNAL_LINE = re.compile(r"^\[\s*(\d+\.\d+)\]\s+\S+\s+kernel:\s?(.*)$")
# Seconds the kernel's clock (printk's) may differ from the process start time's (both since boot).
CLOCK_SLACK_S = 5.0


def parse_kmsg(record: str) -> tuple[float, str] | None:
    """(seconds since boot, message) of one /dev/kmsg record; None for a continuation line."""
    found = KMSG_RECORD.match(record)
    return (int(found[1]) / 1e6, found[2].rstrip("\n")) if found else None


def parse_journal(line: str) -> tuple[float, str] | None:
    """(seconds since boot, message) of one `journalctl -k -o short-monotonic` line."""
    found = JOURNAL_LINE.match(line)
    return (float(found[1]), found[2]) if found else None


def read_kmsg(path: str = "/dev/kmsg") -> list[tuple[float, str]]:
    """The kernel's ring buffer as (seconds since boot, message); raises OSError when not readable."""
    messages = []
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        while True:
            try:
                record = os.read(fd, 8192)
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # overwritten while read: the next one follows
                    continue
                if exc.errno == errno.EAGAIN:  # the end of the buffer
                    break
                raise
            parsed = parse_kmsg(record.decode("utf-8", errors="replace"))
            if parsed is not None:
                messages.append(parsed)
    finally:
        os.close(fd)
    return messages


def read_journal() -> list[tuple[float, str]]:
    """This boot's kernel messages from the journal (readable where /dev/kmsg is not); [] without it."""
    argv = ["journalctl", "-k", "-b", "-o", "short-monotonic", "--no-pager", "-q"]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [parsed for parsed in map(parse_journal, out.splitlines()) if parsed is not None]


def kernel_messages() -> list[tuple[float, str]]:
    """The kernel's messages of this boot, where this user may read them."""
    try:
        return read_kmsg()
    except OSError:
        return read_journal()


def oom_kill(messages: list[tuple[float, str]], pid: int, since_s: float) -> str | None:
    """The OOM killer's line about `pid` logged after `since_s` (seconds since boot: the process's
    start, so a recycled pid's old line does not count); None when it has none."""
    for at, message in reversed(messages):
        found = OOM_KILLED.search(message)
        if found and int(found[1]) == pid and at >= since_s - CLOCK_SLACK_S:
            return message.strip()
    return None


def killed_by_oom(pid: int, start_ticks: int) -> str | None:
    """The kernel's OOM-killer line about the process `pid` that started at `start_ticks` (clock
    ticks since boot, /proc/<pid>/stat), when the kernel's log is readable and has one."""
    return oom_kill(kernel_messages(), pid, start_ticks / os.sysconf("SC_CLK_TCK"))


def death_cause(from_log: tuple[str, str], ended: dict | None, record: dict | None) -> tuple[str, str]:
    """(cause, evidence) of a server's death: `oom_killed` and the kernel's line when it died of
    SIGKILL and the OOM killer names it, else `from_log` (what its own log says). `ended` is the
    pid record's exit, `record` the pid record (specsweep_supervisor)."""
    if ended and ended.get("signal") == 9 and record and isinstance(record.get("server_pid"), int):
        line = killed_by_oom(record["server_pid"], record.get("server_start_ticks") or 0)
        if line:
            return "oom_killed", f"the kernel: {line}"
    return from_log
