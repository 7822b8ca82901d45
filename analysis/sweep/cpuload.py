"""How many of the controller's cores others keep busy now, for a CPU engine's estimate.

The 1-minute load average lags: a minute after a test run ends it still counts most of it (2 busy
cores decay to 0.74), so a sweep planned then is given too little of the CPU and its estimate runs
long (-25% on the demo, docs/bench.md). /proc/stat's busy time over a short interval says what runs
now; where there is none (not Linux), the load average stands in.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

PROC_STAT = Path("/proc/stat")
SAMPLE_S = 0.5  # long enough for a few scheduler ticks on every core, short beside a plan


def ticks(stat: str) -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs from /proc/stat's text: its first line, "cpu user nice
    system idle iowait irq softirq steal [guest guest_nice]"; idle and iowait are not busy, guest
    time is counted in user and nice already. The hosts' interference sampler counts busy time so
    too (roles/benchmark/files/specsweep_interference.py busy_jiffies, stdlib on the host; the two
    are checked to agree in tests/unit/test_cpuload.py)."""
    fields = [int(v) for v in stat.splitlines()[0].split()[1:9]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def busy_cores(stat: Path = PROC_STAT, sample_s: float = SAMPLE_S) -> float:
    """Cores busy over the last `sample_s` seconds (this process's own wait is idle), else the
    1-minute load average."""
    try:
        busy0, total0 = ticks(stat.read_text())
        time.sleep(sample_s)  # the sample's interval: two readings of the counters, not a wait for an event
        busy1, total1 = ticks(stat.read_text())
    except (OSError, ValueError, IndexError):
        return os.getloadavg()[0]
    elapsed = total1 - total0
    return (busy1 - busy0) / elapsed * (os.cpu_count() or 1) if elapsed > 0 else 0.0
