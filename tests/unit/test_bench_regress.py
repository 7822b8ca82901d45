"""bench/regress.py still runs and prints every row its README tables are cut from (numbers of two
cells per row mean nothing; the shape is what is checked)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "regress.py"


def test_the_regress_bench_prints_both_tables_whole() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--cells", "2", "--seed", "3"], capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    main = [r for r in rows if r.startswith(("| 1% ", "| 2% ", "| 3% "))]
    # 3 CVs x 4 shifts x (4 rules + the mixed fleet), and 4 shifts of the steady-accept fleet at CV 2%
    assert len(main) == 64
    assert sum("default: change point + recent drop, shared noise" in r for r in main) == 12
    assert sum("fleet of mixed CVs" in r for r in main) == 12
    assert sum(r.startswith("| 2% ") and "accept length steady" in r for r in main) == 4
    firsts = [r.split(" | ")[0].removeprefix("| ") for r in rows]
    assert [f for f in firsts if " / " in f and f[0].isdigit()] == [
        "0.0005 / 0.002", "0.001 / 0.003", "0.001 / 0.005", "0.001 / 0.007", "0.0005 / 0.01", "0.003 / 0.01",
        "0.01 / 0.02", "0.03 / 0.05",
    ]  # fmt: skip
