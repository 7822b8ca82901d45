"""Who this run is, on the controller: its git revision and the identity its host locks carry.

Filters run inside the ansible-playbook process (or a worker forked from it), so they see that
process directly: no module round trip, no shell.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

# The pid bookkeeping the host modules use (plugins/ has no packages: load it by path).
_spec = importlib.util.spec_from_file_location(
    "specsweep_run_proc", Path(__file__).resolve().parents[1] / "module_utils" / "specsweep_proc.py"
)
assert _spec is not None and _spec.loader is not None
proc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(proc)


def _boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    return int(stat.rsplit(")", 1)[1].split()[1])


def _is_playbook(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2]
    except OSError:
        return False
    return any(os.path.basename(a) == b"ansible-playbook" for a in argv)


def playbook_pid() -> int | None:
    """The ansible-playbook process: the topmost of this process and its ancestors that run
    ansible-playbook (workers are forks of it and share its command line)."""
    found, pid = None, os.getpid()
    while pid > 1:
        if _is_playbook(pid):
            found = pid
        elif found is not None:
            break
        pid = _parent(pid)
    return found


def run_owner(plan: dict[str, Any]) -> dict[str, Any]:
    """The owner record of this run's host locks: run and sweep ids, controller, boot, process."""
    pid = playbook_pid()
    return {
        "run_id": plan["run_id"],
        "sweep_id": plan["id"],
        "controller": socket.gethostname(),
        "boot_id": _boot_id(),
        "pid": pid,
        "start_ticks": proc.proc_start_ticks(pid) if pid else None,
    }


def holder_alive(holder: dict[str, Any]) -> bool:
    """Whether the run holding a lock still runs; one from another controller or boot counts as
    alive, since this machine cannot tell."""
    here = holder.get("controller") == socket.gethostname() and holder.get("boot_id") == _boot_id()
    if not here or not isinstance(holder.get("pid"), int):
        return True
    return proc.proc_start_ticks(holder["pid"]) == holder.get("start_ticks")


def git_rev(repo: str) -> str | None:
    """HEAD of the suite's checkout, for provenance; None outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True, text=True, check=False
        )
    except OSError:
        return None
    return out.stdout.strip() or None


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "specsweep_run_owner": run_owner,
            "specsweep_holder_alive": holder_alive,
            "specsweep_git_rev": git_rev,
        }
