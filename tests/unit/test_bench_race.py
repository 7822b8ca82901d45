"""bench/race.py still runs on the captured H200 sweep and prints a row per design (launches x
effect), each keeping the full sweep's winner; numbers of 2 trials mean nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "race.py"


def test_the_race_bench_prints_every_design_and_keeps_the_winner() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--trials", "2"], capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert len(rows) >= 6, done.stdout
    assert all(row[-1] == "100.0%" for row in rows), done.stdout
