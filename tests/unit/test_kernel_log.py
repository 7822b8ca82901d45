"""The kernel's OOM-killer line about a server (plugins/module_utils/specsweep_kernel.py).

KMSG holds /dev/kmsg records as this machine's kernel (6.18) wrote them when its OOM killer ended
a process in a 64 MiB memory cgroup (mm/oom_kill.c: dump_oom_summary's "oom-kill:..." line, then
__oom_kill_process's "%s: Killed process %d (%s) total-vm:%lukB, ..."); the system-wide and
journal forms are the same format strings with the other message and journalctl's prefix. The last
test makes the kernel's OOM killer end a real process and finds its line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from memcg import HOG, memory_cgroup
from plugin_loader import load_plugin

kernel = load_plugin("plugins/module_utils/specsweep_kernel.py")
proc = load_plugin("plugins/module_utils/specsweep_proc.py")

KMSG = [
    "6,1070,44704701029,-;[  27469]     0 27469    20533    18449    16800     1649         0   196608"
    "        0             0 python3\n",
    "6,1071,44704701032,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
    "oom_memcg=/ssfaults-probe,task_memcg=/ssfaults-probe,task=python3,pid=27469,uid=0\n",
    "3,1072,44704701046,-;Memory cgroup out of memory: Killed process 27469 (python3) total-vm:82132kB, "
    "anon-rss:67200kB, file-rss:6596kB, shmem-rss:0kB, UID:0 pgtables:192kB oom_score_adj:0\n",
]
KILLED = (
    "Memory cgroup out of memory: Killed process 27469 (python3) total-vm:82132kB, anon-rss:67200kB, "
    "file-rss:6596kB, shmem-rss:0kB, UID:0 pgtables:192kB oom_score_adj:0"
)
SYSTEM_WIDE = (
    "[ 8123.456789] gpu7 kernel: Out of memory: Killed process 4242 (llama-server) total-vm:9120340kB, "
    "anon-rss:7340032kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:15020kB oom_score_adj:0"
)


def test_a_kmsg_record_gives_its_time_since_boot_and_its_message() -> None:
    assert kernel.parse_kmsg(KMSG[2]) == (44704.701046, KILLED)
    assert kernel.parse_kmsg(" SUBSYSTEM=memory\n") is None  # a record's continuation line


def test_the_oom_killers_line_is_found_for_its_pid_only_and_only_after_the_process_started() -> None:
    messages = [kernel.parse_kmsg(record) for record in KMSG]
    assert kernel.oom_kill(messages, 27469, since_s=44700.0) == KILLED
    assert kernel.oom_kill(messages, 2746, since_s=44700.0) is None
    # The same pid, recycled by a process started after that kill: not its line.
    assert kernel.oom_kill(messages, 27469, since_s=44800.0) is None


def test_a_system_wide_oom_kill_read_from_the_journal_is_found() -> None:
    line = kernel.parse_journal(SYSTEM_WIDE)
    assert line is not None and line[0] == 8123.456789
    assert kernel.oom_kill([line], 4242, since_s=8000.0) == line[1]
    assert line[1].startswith("Out of memory: Killed process 4242 (llama-server) total-vm:")


@pytest.fixture
def oom_killed() -> Iterator[dict]:
    """The pid record of a process the kernel's OOM killer ended in a 64 MiB memory cgroup."""
    group = memory_cgroup(f"specsweep-test-{os.getpid()}")
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys\nsys.stdin.read(1)\n" + HOG], stdin=subprocess.PIPE
    )
    try:
        start_ticks = proc.proc_start_ticks(child.pid)
        (group / "cgroup.procs").write_text(str(child.pid))
        assert child.stdin is not None
        child.stdin.write(b"x")  # in the group now: allocate
        child.stdin.close()
        assert child.wait(timeout=60) == -9, "the OOM killer ends it with SIGKILL"
        yield {"server_pid": child.pid, "server_start_ticks": start_ticks}
    finally:
        child.kill()
        child.wait()
        group.rmdir()


def test_a_process_the_oom_killer_ended_is_named_oom_killed_with_the_kernels_line(oom_killed: dict) -> None:
    pid = oom_killed["server_pid"]
    line = kernel.killed_by_oom(pid, oom_killed["server_start_ticks"])
    comm = Path(sys.executable).name[:15]  # the kernel's comm: the executable's name, cut at 15
    assert line is not None and f"out of memory: Killed process {pid} ({comm}) total-vm:" in line, line
    from_log = ("unknown", "the last log line")
    killed = {"returncode": -9, "signal": 9, "signal_name": "SIGKILL"}
    assert kernel.death_cause(from_log, killed, oom_killed) == ("oom_killed", f"the kernel: {line}")
    # Another death of the same process (an abort) is what its log says, not the kernel's old line.
    aborted = {"returncode": -6, "signal": 6, "signal_name": "SIGABRT"}
    assert kernel.death_cause(from_log, aborted, oom_killed) == from_log
