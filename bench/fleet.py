"""Parallel efficiency of a shard sweep over 3 SSH test hosts, printed as a table (numbers, not verdicts).

efficiency = sum over hosts of the time spent measuring configs / (hosts x sweep wall time).
Issue 15's target: >= 0.9 for 6 configs on 3 test hosts, configs of unequal length included
(steps 1..6 differ in speed; every host also measures its own baseline, counted as busy time).
The rest of the hosts' time is split where it goes: before a host's first config (Ansible's start,
the plan, lock, preflight), between its configs (claims, the loop over configs other hosts took),
waiting for the slowest host to finish its last config, and after that (the pass for lost hosts'
claims, the last server's stop, the lock's release, the report).
Configs use the suite's default benchmark settings (one warm-up, 3 repeats of 4 prompts x 96
tokens), as a nightly runs them; `--short` measures 2 repeats x 32 tokens without warm-up, where
the fixed plays weigh three to four times as much. The hosts are the integration tests'
network-namespace SSH hosts (root; run the tests once first so the wheelhouse .cache/wheels exists):

    .venv/bin/python bench/fleet.py [--runs 3] [--short]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "integration")]

from sweeps import WHEELHOUSE, host_vars, playbook  # noqa: E402 - after the path set-up, as a script
from testhosts import NetnsHosts  # noqa: E402

HOSTS = ("bench1", "bench2", "bench3")
SWEEP = ("-e", "mode=shard", "-e", "steps=1..6")
SHORT = ("-e", "repeats=2", "-e", "max_tokens=32", "-e", "warmup=0")


SHARES = (
    "busy",
    "before first config",
    "between configs",
    "waiting for the slowest host",
    "after the last config",
)


def one_sweep(inventory: Path, results: Path, sweep_id: str, extra: tuple[str, ...]) -> dict[str, float]:
    """Each SHARES part of the hosts' time (the first, busy, is the efficiency), the wall time in s
    and the configs measured, of one shard sweep."""
    t0 = time.time()  # the facts' clock: the test hosts share the controller's
    run = playbook(inventory, results, sweep_id, *SWEEP, *extra, timeout=3600)
    t1 = time.time()
    if run.proc.returncode != 0:
        raise RuntimeError(run.output[-3000:])
    files = (results / sweep_id).glob("*/*.json")
    timings = ({"host": p.parent.name, **json.loads(p.read_text())["timings"]} for p in files)
    facts = pd.DataFrame(timings).sort_values(["host", "started_at"])
    hosts = facts.groupby("host")
    parts = {
        "busy": (facts["finished_at"] - facts["started_at"]).sum(),
        "before first config": (hosts["started_at"].min() - t0).sum(),
        "between configs": (facts["started_at"] - hosts["finished_at"].shift()).sum(),
        "waiting for the slowest host": (facts["finished_at"].max() - hosts["finished_at"].max()).sum(),
        "after the last config": len(HOSTS) * (t1 - facts["finished_at"].max()),
    }
    whole = len(HOSTS) * (t1 - t0)
    return {**{name: part / whole for name, part in parts.items()}, "wall": t1 - t0, "configs": len(facts)}


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
    table = pd.DataFrame(results)
    settings = "short configs" if args.short else "default bench settings"
    rows = [
        (f"parallel efficiency (busy share), shard, 6 configs x 3 hosts, {settings}", "busy", ">= 0.9"),
        *((f"share of the hosts' time {name}", name, "") for name in SHARES[1:]),
        ("sweep wall time (s)", "wall", ""),
        ("config runs per sweep (a baseline per host + 6 shared)", "configs", "9"),
    ]
    print("| measurement | n | median | min | target |")
    print("|---|---|---|---|---|")
    for label, column, target in rows:
        values = table[column]
        print(f"| {label} | {len(values)} | {values.median():.3f} | {values.min():.3f} | {target} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
