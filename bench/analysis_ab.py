"""The CLI rows of bench/analysis_report.py, paired: an earlier revision against this tree, as a table.

Not a test: numbers, not verdicts. Both trees report the same folders (10,000 facts written by the
earlier revision's own generator, in its format, which this tree reads too), each with its own
analysis cache; every iteration runs each row in both trees, the order flipped every other time,
so that a busy moment of a shared machine hits both. Rows: warm (nothing changed), night (a new
200-fact sweep beside it), grown (200 facts added to the folder), cold (`--no-cache`). The
earlier tree (`git archive` of it: the repository is only read) runs with this venv's Python: it
needs its own dependencies there (99cf4df: orjson).
Both trees are byte-compiled first, as an installed package is: where PYTHONDONTWRITEBYTECODE is
set (this machine sets it), each run would otherwise compile every module from source, a cost
that grows with the number of modules rather than with the work.

    .venv/bin/python bench/analysis_ab.py [--before 99cf4df] [--runs 5] [--files 10000] [--new 200]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROWS = ("warm", "night", "grown", "cold")


def report(tree: Path, root: Path, sweeps: list[Path], *extra: str) -> float:
    """Seconds of one `python -m analysis report --out` in `tree`, a fresh interpreter."""
    env = os.environ | {"PYTHONPATH": str(tree), "SPECSWEEP_ANALYSIS_CACHE": str(root / f"cache-{tree.name}")}
    argv = [
        sys.executable,
        "-m",
        "analysis",
        "report",
        *map(str, sweeps),
        "--out",
        str(root / f"out-{tree.name}"),
    ]
    started = time.perf_counter()
    subprocess.run([*argv, *extra], cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def median_interval(diffs: list[float]) -> tuple[float, float]:
    """Distribution-free 95% interval of the median paired difference (sign-test order statistics);
    the whole range when there are too few pairs for one."""
    d, n = sorted(diffs), len(diffs)
    k = 0  # how many differences each end may drop: P(Binomial(n, 1/2) <= k) <= 0.025
    while sum(math.comb(n, i) for i in range(k + 2)) / 2**n <= 0.025:
        k += 1
    return d[k], d[n - 1 - k]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--before", default="99cf4df", help="the earlier revision (issue 13 was read at 99cf4df)"
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--files", type=int, default=10_000, help="facts of the fleet both trees report")
    parser.add_argument("--new", type=int, default=200, help="facts of the night / grown rows")
    parser.add_argument("--rows", default=",".join(ROWS), help=f"some of {', '.join(ROWS)}")
    args = parser.parse_args()
    rows = [row for row in ROWS if row in args.rows.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        before = root / "before"
        before.mkdir()
        archive = subprocess.run(["git", "archive", args.before], cwd=REPO, check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive.stdout, check=True)
        sys.path[:0] = [str(before / "bench"), str(before)]
        import analysis_report as generator  # the earlier revision's: facts both trees read

        trees = [before, REPO]
        for tree in trees:
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "analysis")], check=True)
        fleet = generator.generate(root, args.files, 3, 4, 96)
        if set(rows) - {"cold"}:
            for tree in trees:
                report(tree, root, [fleet])  # fill each tree's cache
        times: dict[str, dict[Path, list[float]]] = {row: {t: [] for t in trees} for row in rows}
        for i in range(args.runs):
            order = trees if i % 2 == 0 else trees[::-1]
            for row in rows:
                sweeps = [fleet]
                if row == "night":
                    sweeps.append(generator.generate(root, args.new, 3, 4, 96, sweep=f"night{i}"))
                if row == "grown":
                    generator.generate(root, args.new, 3, 4, 96, first_host=100 + i)
                extra = ("--no-cache",) if row == "cold" else ()
                for tree in order:
                    times[row][tree].append(report(tree, root, sweeps, *extra))
    load = os.getloadavg()[0]
    print(f"{args.before} (before) against this tree (after), n={args.runs} per row; load average {load:.1f}")
    print(
        "| row | before median s | after median s | after - before, paired: median [95% CI] | after faster |"
    )
    print("|---|---|---|---|---|")
    for row in rows:
        b, a = times[row][before], times[row][REPO]
        diffs = [y - x for x, y in zip(b, a, strict=True)]
        lo, hi = median_interval(diffs)
        faster = sum(d < 0 for d in diffs)
        medians = f"{statistics.median(b):.2f} | {statistics.median(a):.2f}"
        diff = f"{statistics.median(diffs):+.3f} [{lo:+.3f}, {hi:+.3f}]"
        print(f"| {row} | {medians} | {diff} | {faster}/{len(diffs)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
