"""bench/search.py still runs and prints both tables whole, and the launch count README quotes
(at most 5 launches for steps 1..10 on noiseless curves: every one of the 512 shapes) holds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "search.py"


def test_the_search_bench_prints_both_tables_whole() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--trials", "1"], capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [
        line.split(" | ") for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line
    ]
    steps = [r for r in rows if len(r) == 11 and r[0] != "| curves"]
    levels = [r for r in rows if len(r) == 14 and r[0] != "| curves"]
    # 3 parallel x 3 noiseless rows, the plateau and the OOM tail, 3 CVs x (3 parallel + the grid)
    assert len(steps) == 23, done.stdout
    # 2 CVs x (3 strategies at parallel 1, 2 at parallel 2, 2 on independent peaks)
    assert len(levels) == 14, done.stdout
    shapes = [r for r in steps if r[0] == "| all 512 shapes" and r[1:3] == ["none", "1"]]
    assert [r[4] for r in shapes] == ["5 / 5"], shapes
