"""What else used the host while one run was measured (the fact's Run.interference).

Standard library only, Python 3.9+: copied beside specsweep_bench.py, which calls `Watch.begin()`
before a run and `.end()` after it. Every probe degrades to "not known" (None, no pids) where the
host does not expose it: no nvidia-smi (CPU hosts, CI), no cpufreq, a /proc it may not read.

Whose work is "ours": the server's process group (found from the port it listens on) and the
client's own. Everything else is "others".

The rule for a flag, and why:
- GPU: another process had a compute context on a GPU (nvidia-smi --query-compute-apps) at the
  run's start or end. Any is enough: a second context time-slices the GPU with our server's.
- CPU: others used at least half a core on average over the run (from /proc/stat's busy time less
  our processes' own, so not the lagging 1-minute load average, which also counts our own threads)
  AND the cores were short: ours and theirs together left less than half a core idle. Foreign work
  that fits in idle cores does not delay our threads; foreign work that fills the machine does,
  which is when the load average exceeds what the server and the client explain.
The 1-minute load average and the mean CPU frequency are recorded for the reader either way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import Any, Callable

GPU_QUERY = ["--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"]
MIN_OTHER_CORES = 0.5  # half a core of foreign work on average over the run
MIN_IDLE_CORES = 0.5  # less than this idle: the cores were short
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal (guest is inside user)


def parse_loadavg(text: str) -> float | None:
    """The 1-minute load average from /proc/loadavg ("0.08 0.03 0.01 1/209 550")."""
    try:
        return float(text.split()[0])
    except (IndexError, ValueError):
        return None


def parse_cpu_mhz(scaling_khz: list[str], cpuinfo: str) -> float | None:
    """Mean current frequency: cpufreq's scaling_cur_freq (kHz) where present, else /proc/cpuinfo."""
    khz = [float(t) for t in scaling_khz if t.strip().isdigit()]
    if khz:
        return sum(khz) / len(khz) / 1000.0
    mhz = []
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() == "cpu mhz":
            try:
                mhz.append(float(value))
            except ValueError:
                continue
    return sum(mhz) / len(mhz) if mhz else None


def parse_compute_apps(csv_text: str) -> list[int]:
    """Pids of `nvidia-smi --query-compute-apps=pid,... --format=csv,noheader` ("554, python3, 1542 MiB")."""
    pids = []
    for line in csv_text.splitlines():
        first = line.split(",", 1)[0].strip()
        if first.isdigit():
            pids.append(int(first))
    return pids


def busy_jiffies(stat_text: str) -> int | None:
    """Machine-wide busy time from /proc/stat's `cpu` line (idle and iowait left out)."""
    for line in stat_text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            try:
                values = [int(v) for v in parts[1:]]
                return sum(values[i] for i in _BUSY_FIELDS if i < len(values))
            except ValueError:
                return None
    return None


def parse_proc_stat(text: str) -> tuple | None:
    """(pgid, utime + stime) of one /proc/<pid>/stat; the command may hold spaces and parentheses."""
    rest = text.rpartition(")")[2].split()
    try:
        return int(rest[2]), int(rest[11]) + int(rest[12])
    except (IndexError, ValueError):
        return None


def listening_inodes(tcp_text: str, port: int) -> set[str]:
    """Socket inodes listening on `port` in /proc/net/tcp or tcp6 text."""
    found = set()
    for line in tcp_text.splitlines()[1:]:
        parts = line.split()
        if len(parts) > 9 and parts[3] == "0A" and parts[1].rsplit(":", 1)[-1] == f"{port:04X}":
            found.add(parts[9])
    return found


def judge(others_cores: float | None, ours_cores: float | None, cpus: int, gpu_others: list[int]) -> tuple:
    """(flagged, reason) by the rule in this module's docstring."""
    reasons = []
    if gpu_others:
        reasons.append(f"other process(es) on the GPU: pid {', '.join(str(p) for p in sorted(gpu_others))}")
    if others_cores is not None and ours_cores is not None:
        short = ours_cores + others_cores > cpus - MIN_IDLE_CORES
        if others_cores >= MIN_OTHER_CORES and short:
            reasons.append(f"other processes used {others_cores:.1f} of {cpus} cores")
    return bool(reasons), "; ".join(reasons) or None


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


class Watch:
    """Samples around one run: `begin()` then `end()` -> the Interference dict."""

    def __init__(
        self,
        port: int | None,
        proc: str = "/proc",
        cpufreq_glob: Callable[[], list[str]] = lambda: [],
        nvidia_smi: str | None = None,
        run: Callable[..., Any] = subprocess.run,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.port = port
        self.proc = proc
        self.cpufreq = cpufreq_glob
        self.nvidia_smi = nvidia_smi
        self.run = run
        self.clock = clock
        self.ours: set[int] = set()
        self._start: dict[str, Any] = {}

    @classmethod
    def for_port(cls, port: int | None) -> Watch:
        """The host's own /proc, cpufreq files and nvidia-smi (where there is one)."""
        import glob

        base = "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq"
        freq = lambda: [_read(p) for p in glob.glob(base)]  # noqa: E731 - read afresh at each run's end
        return cls(port, cpufreq_glob=freq, nvidia_smi=shutil.which("nvidia-smi"))

    def _server_pgid(self) -> int | None:
        """The process group of whoever listens on the server's port (same network namespace)."""
        if not self.port:
            return None
        inodes = listening_inodes(_read(f"{self.proc}/net/tcp"), self.port)
        inodes |= listening_inodes(_read(f"{self.proc}/net/tcp6"), self.port)
        if not inodes:
            return None
        targets = {f"socket:[{i}]" for i in inodes}
        for pid in self._pids():
            fd_dir = f"{self.proc}/{pid}/fd"
            try:
                links = [os.readlink(f"{fd_dir}/{fd}") for fd in os.listdir(fd_dir)]
            except OSError:  # not ours to read, or gone
                continue
            if targets & set(links):
                stat = parse_proc_stat(_read(f"{self.proc}/{pid}/stat"))
                return stat[0] if stat else None
        return None

    def _pids(self) -> list[int]:
        try:
            return [int(n) for n in os.listdir(self.proc) if n.isdigit()]
        except OSError:
            return []

    def _ours_jiffies(self) -> int:
        total = 0
        for pid in self._pids():
            stat = parse_proc_stat(_read(f"{self.proc}/{pid}/stat"))
            if stat and stat[0] in self.ours:
                total += stat[1]
        return total

    def _gpu_pids(self) -> list[int]:
        if not self.nvidia_smi:
            return []
        try:
            done = self.run([self.nvidia_smi, *GPU_QUERY], capture_output=True, text=True, timeout=15)
        except (OSError, subprocess.SubprocessError):
            return []
        return parse_compute_apps(done.stdout) if done.returncode == 0 else []

    def _snapshot(self) -> dict[str, Any]:
        return {
            "t": self.clock(),
            "busy": busy_jiffies(_read(f"{self.proc}/stat")),
            "ours": self._ours_jiffies() if len(self.ours) > 1 else None,
            "gpu": self._gpu_pids(),
        }

    def begin(self) -> None:
        """Before a run: who is ours (the server may have been replaced), and the counters."""
        server = self._server_pgid()
        self.ours = {os.getpgrp()} | ({server} if server is not None else set())
        self._start = self._snapshot()

    def end(self) -> dict[str, Any]:
        """After the run: the Interference dict of the fact's schema."""
        start, stop = self._start, self._snapshot()
        hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        elapsed = max(stop["t"] - start["t"], 1e-6)
        others = ours = None
        if None not in (start["busy"], stop["busy"], start["ours"], stop["ours"]):
            ours = (stop["ours"] - start["ours"]) / hz / elapsed
            others = max((stop["busy"] - start["busy"]) / hz / elapsed - ours, 0.0)
        # Without the server's process group nothing can be told ours: no verdict either way.
        known = len(self.ours) > 1
        seen = start["gpu"] + stop["gpu"] if known else []
        gpu_others = sorted({p for p in seen if not self._is_ours(p, self.ours)})
        cpus = os.cpu_count() or 1
        flagged, reason = judge(others, ours, cpus, gpu_others)
        return {
            "load_avg_1m": parse_loadavg(_read(f"{self.proc}/loadavg")),
            "cpu_mhz": parse_cpu_mhz(self.cpufreq(), _read(f"{self.proc}/cpuinfo")),
            "gpu_other_pids": gpu_others,
            "cpu_other_cores": None if others is None else round(others, 3),
            "flagged": flagged,
            "reason": reason,
        }

    def _is_ours(self, pid: int, ours: set[int]) -> bool:
        """A pid this /proc shows in one of our process groups (one it cannot see is another's)."""
        stat = parse_proc_stat(_read(f"{self.proc}/{pid}/stat"))
        return bool(stat) and stat[0] in ours
