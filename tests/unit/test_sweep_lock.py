"""analysis/sweep/sweeplock.py: one run per sweep id on the controller; no facts of another plan."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from factories import config, entry, fact, host_plan, run
from plugin_loader import load_plugin

from analysis.sweep import identity, sweeplock
from analysis.sweep.hostplan import HostPlan, load


def owner(run_id: str, pid: int) -> dict[str, Any]:
    """A run_owner record as this controller writes it, for the process `pid`."""
    record = identity.run_owner(run_id, "X", 600)
    return {**record, "pid": pid, "start_ticks": identity.start_ticks(pid)}


def test_a_live_run_holds_its_sweep_id_and_a_dead_ones_lock_is_taken_over(tmp_path: Path) -> None:
    path = sweeplock.lock_path(tmp_path, "X")
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert sweeplock.acquire(path, owner("run-1", live.pid)) is None
        assert sweeplock.acquire(path, owner("run-1", live.pid)) is None  # the same run again
        refused = sweeplock.acquire(path, owner("run-2", live.pid + 1))
        assert refused is not None and refused.startswith(
            f"sweep X is running: run run-1, ansible-playbook pid {live.pid}"
        )
        assert "-e resume=X" in refused
        assert json.loads(path.read_text())["run_id"] == "run-1"  # the refused run wrote nothing
    finally:
        live.kill()
        live.wait()
    assert sweeplock.acquire(path, owner("run-3", 1)) is None  # run-1's process is gone
    assert json.loads(path.read_text())["run_id"] == "run-3"
    assert path.parent == tmp_path / ".locks"  # beside the sweep folders, not inside X


def test_an_ended_run_removes_its_lock_and_the_next_run_removes_the_locks_of_killed_runs(
    tmp_path: Path,
) -> None:
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert sweeplock.acquire(sweeplock.lock_path(tmp_path, "A"), owner("run-a", live.pid)) is None
        killed = sweeplock.lock_path(tmp_path, "K")
        gone = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        assert sweeplock.acquire(killed, owner("run-k", gone.pid)) is None
        gone.kill()  # killed outright: nothing of it removes its lock
        gone.wait()
        far = sweeplock.lock_path(tmp_path, "F")
        far.write_text(json.dumps({**owner("run-f", 1), "controller": "another-machine"}))
        # Another run's lock is not this run's to remove.
        assert sweeplock.release(sweeplock.lock_path(tmp_path, "A"), "run-k") is False
        # The next run of any sweep takes its own lock and removes K's (its run is gone), not A's
        # (alive) nor F's (another controller's: this one cannot tell).
        assert sweeplock.acquire(sweeplock.lock_path(tmp_path, "B"), owner("run-b", live.pid)) is None
        assert sorted(p.name for p in (tmp_path / ".locks").iterdir()) == ["A.lock", "B.lock", "F.lock"]
        # Each run removes its own as it exits (the interrupt callback), interrupted or not.
        assert sweeplock.release(sweeplock.lock_path(tmp_path, "A"), "run-a") is True
        assert sweeplock.release(sweeplock.lock_path(tmp_path, "B"), "run-b") is True
        assert sweeplock.release(sweeplock.lock_path(tmp_path, "B"), "run-b") is False  # gone already
        assert sorted(p.name for p in (tmp_path / ".locks").iterdir()) == ["F.lock"]
    finally:
        live.kill()
        live.wait()


ENTRY = entry(config(1), ["llama-server", "--api-key", "k", "-n", "1"], {"T": "1"})
SETTINGS = {"max_tokens": 8, "warmup": 0, "repeats": 1, "concurrency": [1]}


def write_fact(sweep: Path, **changes: Any) -> None:
    fact = {"launch": {"argv": ["llama-server", "--api-key", "<redacted>", "-n", "1"], "env": {"T": "1"}},
            "benchmark": {**SETTINGS, "client": "specsweep"}}  # fmt: skip
    for key, value in changes.items():
        part, field = key.split("__")
        fact[part][field] = value
    (sweep / "h1").mkdir(parents=True, exist_ok=True)
    (sweep / "h1" / "s1.json").write_text(json.dumps(fact))


def test_facts_measured_as_this_plan_would_pass_and_others_are_named(tmp_path: Path) -> None:
    hosts = {h: load(HostPlan, host_plan([ENTRY])) for h in ("h1", "h2")}
    assert sweeplock.other_plan(tmp_path, hosts, SETTINGS) == []  # nothing measured yet
    write_fact(tmp_path)
    assert sweeplock.other_plan(tmp_path, hosts, SETTINGS) == []  # the same plan: a resume
    assert sweeplock.other_plan(tmp_path, hosts, {**SETTINGS, "max_tokens": 96}) == [
        "h1/s1 was measured with max_tokens 8 (now 96)"
    ]
    write_fact(tmp_path, launch__argv=["llama-server", "--api-key", "<redacted>", "-n", "2"])
    assert sweeplock.other_plan(tmp_path, hosts, SETTINGS) == [
        "h1/s1 was measured with argv 'llama-server --api-key <redacted> -n 2'"
    ]


def test_a_fact_kept_on_its_host_is_judged_by_the_rule_of_one_on_the_controller() -> None:
    results = load_plugin("plugins/action/specsweep_results.py")
    kept = fact(config(2), [run([100.0])], host="h1")
    settings = {"max_tokens": 128, "warmup": 1, "repeats": 3, "concurrency": [1]}
    plan = {"hosts": {"h1": host_plan([entry(config(2), kept.launch.argv)])}, "sweep": {"settings": settings}}
    otherwise = results.ActionModule._measured_otherwise
    assert otherwise(kept, "h1", plan) is None  # measured as this run's plan says: recorded
    longer = {**plan, "sweep": {"settings": {**settings, "max_tokens": 96}}}
    assert otherwise(kept, "h1", longer) == "h1/s2 was measured with max_tokens 128 (now 96)"
    gone = {**plan, "hosts": {"h1": host_plan([])}}
    assert otherwise(kept, "h1", gone) == "h1/s2 is not in this run's plan"
