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
network-namespace SSH hosts (root; run the tests once first so the wheelhouse .cache/wheels exists),
or with `--inventory` the hosts `--hosts` of an inventory whose hosts have the engine installed
(the smoke test's way: the test session's hosts; then nothing is installed):

    .venv/bin/python bench/fleet.py [--runs 3] [--short] [--steps 1..6]
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

from analysis.sweep.request import int_list  # noqa: E402

SHORT = ("-e", "repeats=2", "-e", "max_tokens=32", "-e", "warmup=0")


SHARES = (
    "busy",
    "before first config",
    "between configs",
    "waiting for the slowest host",
    "after the last config",
)


def one_sweep(
    inventory: Path, hosts: list[str], results: Path, sweep_id: str, extra: list[str]
) -> dict[str, float]:
    """Each SHARES part of the hosts' time (the first, busy, is the efficiency), the wall time in s
    and the configs measured, of one shard sweep over `hosts`."""
    t0 = time.time()  # the facts' clock: the test hosts share the controller's
    target = ("-e", "mode=shard", "-e", f"target={','.join(hosts)}")
    run = playbook(inventory, results, sweep_id, *target, *extra, timeout=3600)
    t1 = time.time()
    if run.proc.returncode != 0:
        raise RuntimeError(run.output[-3000:])
    files = (results / sweep_id).glob("*/*.json")
    timings = ({"host": p.parent.name, **json.loads(p.read_text())["timings"]} for p in files)
    facts = pd.DataFrame(timings).sort_values(["host", "started_at"])
    by_host = facts.groupby("host")
    parts = {
        "busy": (facts["finished_at"] - facts["started_at"]).sum(),
        "before first config": (by_host["started_at"].min() - t0).sum(),
        "between configs": (facts["started_at"] - by_host["finished_at"].shift()).sum(),
        "waiting for the slowest host": (facts["finished_at"].max() - by_host["finished_at"].max()).sum(),
        "after the last config": len(hosts) * (t1 - facts["finished_at"].max()),
    }
    whole = len(hosts) * (t1 - t0)
    return {**{name: part / whole for name, part in parts.items()}, "wall": t1 - t0, "configs": len(facts)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--short", action="store_true", help="2 repeats x 32 tokens, no warm-up")
    parser.add_argument("--steps", default="1..6", help="the shared configs (-e steps)")
    parser.add_argument("--hosts", default="bench1,bench2,bench3", help="the hosts (comma-separated)")
    parser.add_argument("--inventory", type=Path, help="an inventory of hosts --hosts, engine installed")
    parser.add_argument("-e", dest="extra", action="append", default=[], help="more -e for each sweep")
    args = parser.parse_args()
    hosts = args.hosts.split(",")
    extra = [*(SHORT if args.short else ()), "-e", f"steps={args.steps}",
             *(word for setting in args.extra for word in ("-e", setting))]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if args.inventory:
            results = [one_sweep(args.inventory, hosts, root, f"eff{i}", extra) for i in range(args.runs)]
        else:
            if not WHEELHOUSE.is_dir():
                sys.exit("run the integration tests once first: they fill the wheelhouse .cache/wheels")
            with NetnsHosts(root, hosts) as netns:
                inventory = netns.write_inventory(root / "hosts.yml", hostvars=host_vars(netns, WHEELHOUSE))
                install = playbook(inventory, root, "install", "-e", "plan_only=true")
                if install.proc.returncode != 0:
                    raise RuntimeError(install.output[-3000:])
                results = [one_sweep(inventory, hosts, root, f"eff{i}", extra) for i in range(args.runs)]
    table = pd.DataFrame(results)
    settings = "short configs" if args.short else "default bench settings"
    shared = len(int_list("steps", args.steps))
    shape = f"{shared} configs x {len(hosts)} hosts, {settings}"
    rows = [
        (f"parallel efficiency (busy share), shard, {shape}", "busy", ">= 0.9"),
        *((f"share of the hosts' time {name}", name, "") for name in SHARES[1:]),
        ("sweep wall time (s)", "wall", ""),
        (f"config runs per sweep (a baseline per host + {shared} shared)", "configs", len(hosts) + shared),
    ]
    print(f"sweep: -e mode=shard {' '.join(extra[1::2])}")
    print("| measurement | n | median | min | target |")
    print("|---|---|---|---|---|")
    for label, column, target in rows:
        values = table[column]
        print(f"| {label} | {len(values)} | {values.median():.3f} | {values.min():.3f} | {target} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
