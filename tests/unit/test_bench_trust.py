"""bench/trust.py still runs and prints every row its tables are cut from (with a handful of
sweeps the percentages mean nothing; the shape is what is checked)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from factories import config, fact, relaunched, run, write_sweep

BENCH = Path(__file__).resolve().parents[2] / "bench" / "trust.py"


def demo(root: Path, k: int, base: float, spec: float, again: bool = False) -> Path:
    """A README demo sweep: baseline and s1, three repeats each (and the baseline's second launch)."""
    made = [(config(), base, 1.0), (config(1), spec, 2.0)]
    facts = [
        fact(c, [run([t + i]) for i in range(3)], sweep_id=f"demo-{k}", started_at=at) for c, t, at in made
    ]
    return write_sweep(root, relaunched(facts) if again else facts)


def bench(sweeps: list[Path]) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(BENCH), "--sweeps", "4", "--seed", "2", "--real", *map(str, sweeps)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done


def test_the_trust_bench_prints_every_design_and_the_real_runs(tmp_path: Path) -> None:
    done = bench([demo(tmp_path, k, b, s) for k, (b, s) in enumerate([(30.0, 36.0), (20.0, 30.0)])])
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[0].startswith("| host | design | cover |")
    synthetic = rows[1:9]
    assert sum(r.startswith("| this machine |") for r in synthetic) == 4
    assert all(r.count("%") == 8 for r in synthetic), synthetic
    assert rows[9].startswith("| runs | s1 speedup")
    real = rows[10:]
    # 2 runs alone (within one launch), 2 ordered pairs with a repeated baseline, both pooled.
    assert [r.split(" | ")[2] for r in real] == ["within_launch"] * 2 + ["launch_var"] * 2 + ["launches"]
    assert "pairs with a repeated baseline: 2;" in done.stdout


def test_runs_with_their_own_repeated_baseline_are_judged_as_they_are(tmp_path: Path) -> None:
    # Borrowing another run's baseline would mix two runs' loads: each run is one row, no pairs.
    done = bench(
        [demo(tmp_path, k, b, s, again=True) for k, (b, s) in enumerate([(30.0, 36.0), (20.0, 30.0)])]
    )
    rows = [line for line in done.stdout.splitlines() if line.startswith("| demo-") or "pooled" in line]
    assert [r.split(" | ")[0] for r in rows] == ["| demo-0", "| demo-1", "| all 2 pooled as launches"]
    assert "runs, each with its own repeated baseline: 2;" in done.stdout
