"""bench/spine.py and bench/fleet.py still run and print every row, at their smallest settings, on
the session's engine and SSH hosts (the integration tests install them once; the benches' own
hosts and install are left out: tests/testhosts.py and the install have tests of their own).
Numbers of one tiny run mean nothing; the rows, their counts and what must hold are checked."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from testhosts import NetnsHosts

BENCH = Path(__file__).resolve().parents[2] / "bench"


def table(*argv: str | Path) -> dict[str, tuple[int, float, float]]:
    """Run a bench; its table rows by name: (n, median, the third column)."""
    done = subprocess.run([sys.executable, *map(str, argv)], capture_output=True, text=True, timeout=900,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    rows = re.findall(r"^\| (.+?) \| (\d+) \| (-?\d+\.\d+) \| (-?\d+\.\d+) \| .*\|$", done.stdout, re.M)
    return {name: (int(n), float(median), float(third)) for name, n, median, third in rows}


def test_the_spine_bench_measures_detection_and_overhead(
    local_engine, sweep_inventory: Path, ssh_hosts: NetnsHosts
) -> None:
    # One launch per detection row, held back 1 s; a one-config sweep of 8 tokens on one host.
    rows = table(BENCH / "spine.py", "--repeats", "1", "--delay", "1", "--stall-s", "1",
                 "--engine-python", local_engine.python, "--model", local_engine.model,
                 "--inventory", sweep_inventory, "--target", ssh_hosts.names[0], "--steps", "1",
                 "--no-baseline", "--bench-repeats", "1", "--max-tokens", "8")  # fmt: skip
    assert list(rows) == [
        "readiness detection (s)", "crash-at-load detection (s)", "hang detection, SIGSTOP while loading (s)",
        "hang detection, silent and idle: past stall_s 1 (s)", "orchestration overhead (ratio, 1 configs)",
        "orchestration overhead per config (s)", "sweep wall time (s)",
        "engine load + benchmark, all configs (s)",
    ], rows  # fmt: skip
    assert all(n == 1 for n, _, _ in rows.values()), rows
    # A crash is noticed after it happened, within the module's poll; the sweep outlasts its engine time.
    assert 0 < rows["crash-at-load detection (s)"][1] < 5, rows
    wall, engine = rows["sweep wall time (s)"][1], rows["engine load + benchmark, all configs (s)"][1]
    assert 0 < engine < wall and rows["orchestration overhead (ratio, 1 configs)"][1] > 1, rows


def test_the_fleet_bench_splits_the_hosts_time(sweep_inventory: Path, ssh_hosts: NetnsHosts) -> None:
    # One shard sweep: a baseline per host and one shared config, of one repeat of 8 tokens.
    rows = table(BENCH / "fleet.py", "--inventory", sweep_inventory, "--hosts", ",".join(ssh_hosts.names),
                 "--runs", "1", "--steps", "1", "--short", "-e", "repeats=1",
                 "-e", "max_tokens=8")  # fmt: skip
    hosts = len(ssh_hosts.names)
    shares = [f"share of the hosts' time {part}" for part in ("before first config", "between configs",
              "waiting for the slowest host", "after the last config")]  # fmt: skip
    efficiency = f"parallel efficiency (busy share), shard, 1 configs x {hosts} hosts, short configs"
    assert list(rows) == [efficiency, *shares, "sweep wall time (s)",
                          "config runs per sweep (a baseline per host + 1 shared)"], rows  # fmt: skip
    # Every host measured its baseline and one of them the shared config; the parts fill the hosts' time.
    assert rows["config runs per sweep (a baseline per host + 1 shared)"][1] == hosts + 1
    assert abs(sum(rows[name][1] for name in (efficiency, *shares)) - 1) < 0.01, rows


def test_the_load_bench_holds_each_level_it_asks_for(local_engine) -> None:
    # One level of 4 tokens against the earlier client (4f62a9a) and this one, on the session's engine.
    done = subprocess.run([sys.executable, str(BENCH / "load.py"), "--levels", "1", "--max-tokens", "4",
                           "--engine-python", str(local_engine.python), "--model", str(local_engine.model)],
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    rows = re.findall(
        r"^\s+(\d+) \| +(\d+\.\d+) \| +(\d+\.\d+) \| +(\d+\.\d+) \| +(\d+)/(\d+)$", done.stdout, re.M
    )
    assert [r[0] for r in rows] == ["1"], done.stdout
    assert float(rows[0][2]) == 1.0, done.stdout  # the client held its one request in flight
