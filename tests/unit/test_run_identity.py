"""The controller-side identity of a run (analysis.sweep.identity): what host locks carry, and when a
lock's holder may be taken over."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from plugin_loader import REPO

from analysis.sweep import identity


def test_the_owner_is_the_topmost_ansible_playbook_process_not_a_forked_worker(tmp_path: Path) -> None:
    # A stand-in "ansible-playbook" that forks a worker; the worker asks who the run is.
    script = tmp_path / "ansible-playbook"
    script.write_text(
        "import json, os, sys\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from analysis.sweep import identity\n"
        "main = os.getpid()\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    owner = identity.run_owner('r', 's', 600)\n"
        "    print(json.dumps({'main': main, 'owner': owner}), flush=True)\n"
        "    os._exit(0)\n"
        "os.waitpid(child, 0)\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True, cwd=REPO)
    seen = json.loads(out.stdout)
    assert seen["owner"]["pid"] == seen["main"]
    assert (seen["owner"]["run_id"], seen["owner"]["sweep_id"], seen["owner"]["lease_s"]) == ("r", "s", 600)
    assert isinstance(seen["owner"]["start_ticks"], int)
    assert seen["owner"]["controller"] == socket.gethostname()


def test_outside_ansible_playbook_there_is_no_process_to_name() -> None:
    owner = identity.run_owner("20261130T020000000000Z", "nightly-1", 600)
    assert (owner["pid"], owner["start_ticks"], owner["sweep_id"]) == (None, None, "nightly-1")
    assert owner["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def test_a_holder_is_alive_while_its_process_runs_and_dead_once_it_is_gone() -> None:
    here = identity.run_owner("20261130T020000000000Z", "nightly-1", 600)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ticks = identity.start_ticks(sleeper.pid)
        assert isinstance(ticks, int)
        holder = {**here, "pid": sleeper.pid, "start_ticks": ticks}
        assert identity.holder_alive(holder) is True
        assert identity.holder_alive({**holder, "start_ticks": ticks + 1}) is False  # pid reused
    finally:
        sleeper.kill()
        sleeper.wait()
    assert identity.holder_alive(holder) is False
    assert identity.start_ticks(sleeper.pid) is None
    # Another controller's run cannot be checked from here: it counts as alive.
    assert identity.holder_alive({**holder, "controller": "other-controller"}) is True
    assert identity.holder_alive({**holder, "boot_id": "another-boot"}) is True
    # A holder that names no process cannot be checked either.
    assert identity.holder_alive({**holder, "pid": None}) is True


def test_a_holder_is_gone_when_its_process_died_or_its_lease_ran_out() -> None:
    me = os.getpid()
    alive = {**identity.run_owner("r", "s", 600), "pid": me, "start_ticks": identity.start_ticks(me)}
    assert identity.holder_gone(alive, 10.0) is False
    assert identity.holder_gone(alive, None) is False  # the host could not say how old the lock is
    assert identity.holder_gone(alive, 600.0) is False
    assert identity.holder_gone(alive, 601.0) is True  # lease_s without a renewal
    assert identity.holder_gone({**alive, "lease_s": None}, 10_000.0) is False  # no lease recorded
    dead = {**alive, "start_ticks": alive["start_ticks"] + 1}
    assert identity.holder_gone(dead, 10.0) is True
    # Another controller's live-looking run is only given up when its lease runs out.
    elsewhere = {**dead, "controller": "other-controller"}
    assert (identity.holder_gone(elsewhere, 10.0), identity.holder_gone(elsewhere, 700.0)) == (False, True)


def test_a_refusal_names_the_holding_sweep_and_how_to_free_the_host() -> None:
    holder = {"run_id": "r1", "sweep_id": "nightly-1", "pid": 4242, "controller": "ctl"}
    assert identity.refusal("gpu-node-1", holder, "/var/tmp/specsweep/sweep.lock") == (
        "gpu-node-1 is in use by sweep nightly-1; run r1, ansible-playbook pid 4242 on ctl; this run leaves "
        "it alone. If that sweep is gone, remove /var/tmp/specsweep/sweep.lock on the host."
    )
    assert identity.refusal("h", {}, "/l").startswith(
        "h is in use by sweep ?; run ?, ansible-playbook pid ? on ?;"
    )


def test_git_rev_names_the_checkout_and_none_elsewhere(tmp_path: Path) -> None:
    argv = ["git", "-C", str(REPO), "rev-parse", "HEAD"]
    head = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert identity.git_rev(str(REPO)) == head.stdout.strip()
    assert identity.git_rev(REPO) == head.stdout.strip()
    assert identity.git_rev(str(tmp_path)) is None
