"""Who this run is, on the controller: its git revision and the owner its host locks record.

Called by the plan action inside the ansible-playbook process (or a worker forked from it), so
it sees that process directly: no module round trip, no shell.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path
from typing import Any


def _boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()


def _stat(pid: int) -> list[str]:
    """/proc/<pid>/stat after the command name (which may hold spaces and parentheses)."""
    return Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace").rsplit(")", 1)[1].split()


def start_ticks(pid: int) -> int | None:
    """Kernel start time of a controller process (tells a live pid from a recycled one)."""
    try:
        return int(_stat(pid)[19])
    except (OSError, IndexError, ValueError):
        return None


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
        try:
            pid = int(_stat(pid)[1])
        except (OSError, IndexError, ValueError):
            break
    return found


def run_owner(run_id: str, sweep_id: str, lease_s: int) -> dict[str, Any]:
    """The owner record of this run's host locks: run and sweep ids, controller, boot, process, lease."""
    pid = playbook_pid()
    return {
        "run_id": run_id,
        "sweep_id": sweep_id,
        "controller": socket.gethostname(),
        "boot_id": _boot_id(),
        "pid": pid,
        "start_ticks": start_ticks(pid) if pid else None,
        "lease_s": lease_s,
    }


def holder_alive(holder: dict[str, Any]) -> bool:
    """Whether the run holding a lock still runs; one from another controller or boot counts as
    alive, since this machine cannot tell."""
    here = holder.get("controller") == socket.gethostname() and holder.get("boot_id") == _boot_id()
    if not here or not isinstance(holder.get("pid"), int):
        return True
    return start_ticks(holder["pid"]) == holder.get("start_ticks")


def holder_gone(holder: dict[str, Any], age_s: float | None) -> bool:
    """Whether a lock's holder can be taken over: its controller process is gone, or it stopped
    renewing its lease (the lock file untouched for longer than the holder's lease_s)."""
    lease = holder.get("lease_s")
    expired = isinstance(lease, int | float) and age_s is not None and age_s > lease
    return expired or not holder_alive(holder)


def refusal(host: str, holder: dict[str, Any], path: str) -> str:
    """Why a host is refused, naming the sweep that holds it and how to free it."""
    who = f"run {holder.get('run_id', '?')}, ansible-playbook pid {holder.get('pid', '?')}"
    return (
        f"{host} is in use by sweep {holder.get('sweep_id', '?')}; {who} on {holder.get('controller', '?')}; "
        f"this run leaves it alone. If that sweep is gone, remove {path} on the host."
    )


def port_refusal(host: str, held: dict[str, Any], holder: dict[str, Any]) -> str:
    """Why a host is refused when a process listens on the engine's port (specsweep_lock's
    port_holder): a leftover of a run that ended (named, with how to stop it) or a stranger's."""
    who = ", ".join(
        f"pid {p['pid']} ({p['name']}{', in ' + p['unit'] if p.get('unit') else ''})"
        for p in held["processes"]
    )
    if held.get("hidden"):
        unseen = "a process not visible here (another user's, or in another pid namespace)"
        who = f"{who} and {unseen}" if who else unseen
    port = f"{host}: port {held['port']} is held by {who}"
    if held.get("run_id"):
        sweep = held.get("sweep_id", "?")
        left = [p for p in held["processes"] if p.get("started_by")]
        what = "/".join(sorted({p["started_by"] for p in left}))
        controller = f"{holder.get('controller', '?')} pid {holder.get('pid', '?')}"
        pids = " ".join(str(p["pid"]) for p in left)
        if held.get("supervised"):
            lease = holder.get("lease_s", "?")
            whose = (
                f"Its supervisor stops it once that run's lease ({lease} s) runs out; to free the host now"
            )
        else:
            whose = "It is the operator's to stop"
        return (
            f"{port}, the {what} that run {held['run_id']} of sweep {sweep} started here and did not stop "
            f"(that run has ended: its controller, {controller}, is gone or no longer renews its lease); "
            f"nothing was launched and nothing stopped. {whose}: `ansible-playbook playbooks/release.yml "
            f"-e release={sweep} -e target={host}` (with that sweep's -i and -e release_results_dir where "
            f"not the defaults) stops what that run started, or `kill {pids}` on {host}."
        )
    units = sorted({p["unit"] for p in held["processes"] if p.get("unit")})
    stop = f"`systemctl stop {' '.join(units)}`" if units else "it"
    return (
        f"{port}, a process no specsweep run recorded here; nothing was launched and it was left "
        f"untouched. Stop {stop}, or give the engine another port (llama_server_port, sglang_server_port)."
    )


def git_rev(repo: str | Path) -> str | None:
    """HEAD of the suite's checkout, for provenance; None outside a git checkout."""
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True)
    except OSError:
        return None
    return out.stdout.strip() or None
