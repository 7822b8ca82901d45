"""Parallel efficiency of a shard sweep over 3 SSH test hosts, printed as a table (numbers, not verdicts).

efficiency = sum over hosts of the time spent measuring configs / (hosts x sweep wall time).
Issue 5's target: >= 0.85 for 6 configs on 3 test hosts, configs of unequal length included
(steps 1..6 differ in speed; every host also measures its own baseline, counted as busy time).
Configs use the suite's default benchmark settings (one warm-up, 3 repeats of 4 prompts x 96
tokens), as a nightly runs them; `--short` measures 2 repeats x 32 tokens without warm-up, where
the fixed plays weigh three to four times as much. The hosts are the integration tests'
network-namespace SSH hosts (root; run the tests once first so the wheelhouse .cache/wheels exists):

    .venv/bin/python bench/fleet.py [--runs 3] [--short]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "integration")]

from sweeps import WHEELHOUSE, host_vars, playbook  # noqa: E402 - after the path set-up, as a script
from testhosts import NetnsHosts  # noqa: E402

HOSTS = ("bench1", "bench2", "bench3")
SWEEP = ("-e", "mode=shard", "-e", "steps=1..6")
SHORT = ("-e", "repeats=2", "-e", "max_tokens=32", "-e", "warmup=0")


def one_sweep(
    inventory: Path, results: Path, sweep_id: str, extra: tuple[str, ...]
) -> tuple[float, float, int]:
    """(efficiency, wall s, configs measured) of one shard sweep."""
    t0 = time.monotonic()
    run = playbook(inventory, results, sweep_id, *SWEEP, *extra, timeout=3600)
    wall = time.monotonic() - t0
    if run.proc.returncode != 0:
        raise RuntimeError(run.output[-3000:])
    facts = [json.loads(p.read_text()) for p in (results / sweep_id).glob("*/*.json")]
    busy = sum(f["timings"]["finished_at"] - f["timings"]["started_at"] for f in facts)
    return busy / (len(HOSTS) * wall), wall, len(facts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--short", action="store_true", help="2 repeats x 32 tokens, no warm-up")
    args = parser.parse_args()
    if not WHEELHOUSE.is_dir():
        sys.exit("run the integration tests once first: they fill the wheelhouse .cache/wheels")
    with tempfile.TemporaryDirectory() as tmp, NetnsHosts(Path(tmp), HOSTS) as hosts:
        inventory = hosts.write_inventory(Path(tmp) / "hosts.yml", hostvars=host_vars(hosts, WHEELHOUSE))
        install = playbook(inventory, Path(tmp), "install", "-e", "plan_only=true")
        if install.proc.returncode != 0:
            raise RuntimeError(install.output[-3000:])
        extra = SHORT if args.short else ()
        results = [one_sweep(inventory, Path(tmp), f"eff{i}", extra) for i in range(args.runs)]
    effs, walls, counts = zip(*results, strict=True)
    print("| measurement | n | median | min | target |")
    print("|---|---|---|---|---|")
    settings = "short configs" if args.short else "default bench settings"
    print(f"| parallel efficiency, shard, 6 configs x 3 hosts, {settings} | {len(effs)} "
          f"| {statistics.median(effs):.3f} | {min(effs):.3f} | >= 0.85 |")  # fmt: skip
    print(f"| sweep wall time (s) | {len(walls)} | {statistics.median(walls):.1f} | {min(walls):.1f} | |")
    print(f"| config runs per sweep (a baseline per host + 6 shared) | {len(counts)} | "
          f"{statistics.median(counts):.0f} | {min(counts)} | 9 |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
