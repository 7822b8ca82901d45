"""bench/analysis_report.py and bench/analysis_ab.py still run and print every row, on a tiny fleet
(timings of 20 facts mean nothing; the shape is what is checked)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def run_bench(name: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(BENCH / name), *args], capture_output=True, text=True,
                          timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def test_the_report_bench_prints_every_row_and_phase() -> None:
    out = run_bench("analysis_report.py", "--files", "20", "--new", "5", "--runs", "1", "--repeats", "1",
                    "--prompts", "1", "--max-tokens", "4")  # fmt: skip
    timed = re.findall(r"^(floor: .+?|report --out, .+?)\s+1\s+\d+\.\d\d\s+\d+\.\d\d", out, re.M)
    assert timed == [
        "floor: start Python, import pandas", "floor: read + JSON-decode every file, nothing else",
        "report --out, cold (--no-cache: parse all, draw all)",
        "report --out, warm (nothing changed: cached rows, plots)",
        "report --out, warm + a new sweep of 5 facts", "report --out, warm + 5 facts added to the sweep",
    ], out  # fmt: skip
    phases = re.findall(r"^  (\S.*?)\s+\d+\.\d\d$", out, re.M)
    assert len(phases) == 5 and phases[0].startswith("imports"), out


def test_the_ab_bench_reports_a_revision_against_this_tree() -> None:
    # HEAD as the earlier revision: any revision's tree and generator run the same way.
    out = run_bench("analysis_ab.py", "--before", "HEAD", "--files", "20", "--runs", "1", "--rows", "cold")
    assert out.splitlines()[0].startswith("HEAD (before) against this tree (after), n=1 per row"), out
    number, diff = r"\d+\.\d\d", r"[+-]\d\.\d{3}"
    row = rf"^\| cold \| {number} \| {number} \| {diff} \[{diff}, {diff}\] \| [01]/1 \|$"
    assert re.search(row, out, re.M), out
