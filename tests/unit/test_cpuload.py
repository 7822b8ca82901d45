"""The controller's busy cores now (analysis.sweep.cpuload): /proc/stat's busy time over a short
sample, which follows a load that just ended where the 1-minute load average still counts it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import specsweep_interference  # the hosts' sampler (tests/unit/conftest.py puts its folder on the path)

from analysis.sweep import cpuload

STAT = "cpu  100 5 50 800 40 3 2 0 7 0\ncpu0 50 2 25 400 20 1 1 0 3 0\nintr 1\n"


def test_busy_and_total_jiffies_leave_idle_iowait_and_guest_out() -> None:
    # busy: user 100 + nice 5 + system 50 + irq 3 + softirq 2 + steal 0; guest (7) is in user already.
    assert cpuload.ticks(STAT) == (160, 1000)
    # The same busy time the hosts' interference sampler reads from the same line.
    assert cpuload.ticks(STAT)[0] == specsweep_interference.busy_jiffies(STAT)


def test_a_spinning_process_is_counted_while_it_spins() -> None:
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        assert cpuload.busy_cores(sample_s=1.0) >= 0.8
    finally:
        spin.kill()
        spin.wait()


def test_without_proc_stat_the_load_average_stands_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cpuload.os, "getloadavg", lambda: (1.25, 1.0, 1.0))
    assert cpuload.busy_cores(tmp_path / "missing", sample_s=0.0) == 1.25
    (tmp_path / "stat").write_text("cpu  not numbers\n")
    assert cpuload.busy_cores(tmp_path / "stat", sample_s=0.0) == 1.25
