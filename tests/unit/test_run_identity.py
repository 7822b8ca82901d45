"""The controller-side identity of a run (plugins/filter/specsweep_run.py): what host locks carry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from plugin_loader import REPO, load_plugin

run = load_plugin("plugins/filter/specsweep_run.py")

PLAN = {"run_id": "20261130T020000000000Z", "id": "nightly-1"}


def test_the_owner_is_the_topmost_ansible_playbook_process_not_a_forked_worker(tmp_path: Path) -> None:
    # A stand-in "ansible-playbook" that forks a worker; the worker asks who the run is.
    script = tmp_path / "ansible-playbook"
    script.write_text(
        "import json, os, sys\n"
        f"sys.path.insert(0, {str(REPO / 'tests' / 'unit')!r})\n"
        "from plugin_loader import load_plugin\n"
        "run = load_plugin('plugins/filter/specsweep_run.py')\n"
        "main = os.getpid()\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    owner = run.run_owner({'run_id': 'r', 'id': 's'})\n"
        "    print(json.dumps({'main': main, 'owner': owner}), flush=True)\n"
        "    os._exit(0)\n"
        "os.waitpid(child, 0)\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True, cwd=REPO)
    seen = json.loads(out.stdout)
    assert seen["owner"]["pid"] == seen["main"]
    assert (seen["owner"]["run_id"], seen["owner"]["sweep_id"]) == ("r", "s")
    assert isinstance(seen["owner"]["start_ticks"], int)


def test_outside_ansible_playbook_there_is_no_process_to_name() -> None:
    owner = run.run_owner(PLAN)
    assert (owner["pid"], owner["start_ticks"], owner["sweep_id"]) == (None, None, "nightly-1")


def test_a_holder_is_alive_while_its_process_runs_and_dead_once_it_is_gone() -> None:
    here = run.run_owner(PLAN)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        holder = {**here, "pid": sleeper.pid, "start_ticks": run.proc.proc_start_ticks(sleeper.pid)}
        assert run.holder_alive(holder) is True
        assert run.holder_alive({**holder, "start_ticks": holder["start_ticks"] + 1}) is False  # pid reused
    finally:
        sleeper.kill()
        sleeper.wait()
    assert run.holder_alive(holder) is False
    # Another controller's run cannot be checked from here: it counts as alive.
    assert run.holder_alive({**holder, "controller": "other-controller"}) is True
    assert run.holder_alive({**holder, "boot_id": "another-boot"}) is True


def test_git_rev_names_the_checkout_and_none_elsewhere(tmp_path: Path) -> None:
    argv = ["git", "-C", str(REPO), "rev-parse", "HEAD"]
    head = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert run.git_rev(str(REPO)) == head.stdout.strip()
    assert run.git_rev(str(tmp_path)) is None
