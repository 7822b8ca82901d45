#!/usr/bin/python
"""A per-host lock, so two sweeps never launch servers on the same host at once."""

from __future__ import annotations

DOCUMENTATION = r"""
module: specsweep_lock
short_description: Take, check or release the lock a sweep holds on a host
description:
  - C(identify) (run on the controller) returns who this run is - controller hostname, boot id and the
    pid and start time of the ansible-playbook process - so a later run can tell a live holder from
    a dead one.
  - C(acquired) creates O(path) atomically with O(owner). When another run holds it, nothing changes
    and the result has C(acquired=false) and C(holder). With O(steal_from) it replaces a holder whose
    run id is O(steal_from) (one the caller found dead), and only that holder.
  - C(alive) (run on the controller) says whether O(holder) still runs; a holder from another
    controller or boot is reported alive, since this machine cannot tell.
  - C(released) removes O(path) when O(owner) holds it; another run's lock is left alone.
options:
  state: {type: str, choices: [identify, acquired, alive, released], required: true, description: What to do.}
  path: {type: path, description: Lock file on the host; required for acquired and released.}
  owner: {type: dict, description: This run (from identify, plus run_id and sweep_id).}
  holder: {type: dict, description: The holder to check, for alive.}
  steal_from: {type: str, description: Run id of a dead holder to replace.}
author: specsweep
"""

import json
import os
import socket
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.specsweep_proc import proc_start_ticks, write_json_atomic

STATES = ["identify", "acquired", "alive", "released"]


def boot_id() -> str:
    with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
        return f.read().strip()


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode("utf-8", "replace").split("\0")
    except OSError:
        return []


def parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def playbook_pid() -> int | None:
    """The ansible-playbook process running this module: the topmost of the ancestors that are
    ansible-playbook (its forked workers share its command line)."""
    found, pid = None, os.getppid()
    while pid > 1:
        if any(os.path.basename(arg) == "ansible-playbook" for arg in cmdline(pid)[:2]):
            found = pid
        elif found is not None:
            break
        pid = parent(pid)
    return found


def identify() -> dict:
    pid = playbook_pid()
    return {
        "controller": socket.gethostname(),
        "boot_id": boot_id(),
        "pid": pid,
        "start_ticks": proc_start_ticks(pid) if pid else None,
    }


def alive(holder: dict) -> bool:
    here = holder.get("controller") == socket.gethostname() and holder.get("boot_id") == boot_id()
    if not here or not isinstance(holder.get("pid"), int):
        return True
    return proc_start_ticks(holder["pid"]) == holder.get("start_ticks")


def read(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"run_id": "unreadable lock file"}


def acquire(module: AnsibleModule, path: str, owner: dict, steal_from: str | None) -> None:
    record = {**owner, "acquired_at": time.time()}
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    holder = read(path)
    if holder is not None and holder.get("run_id") == owner["run_id"]:
        module.exit_json(changed=False, acquired=True, holder=holder)
    if holder is not None and steal_from is not None and holder.get("run_id") == steal_from:
        if not module.check_mode:
            write_json_atomic(path, record)
        module.exit_json(changed=True, acquired=True, stolen_from=holder)
    if holder is None:
        if module.check_mode:
            module.exit_json(changed=True, acquired=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            holder = read(path)  # another run won the race
        else:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(record, f)
            module.exit_json(changed=True, acquired=True)
    module.exit_json(changed=False, acquired=False, holder=holder)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": STATES, "required": True},
            "path": {"type": "path"},
            "owner": {"type": "dict"},
            "holder": {"type": "dict"},
            "steal_from": {"type": "str"},
        },
        required_if=[
            ("state", "acquired", ("path", "owner")),
            ("state", "released", ("path", "owner")),
            ("state", "alive", ("holder",)),
        ],
        supports_check_mode=True,
    )
    p = module.params
    if p["state"] == "identify":
        module.exit_json(changed=False, owner=identify())
    if p["state"] == "alive":
        module.exit_json(changed=False, alive=alive(p["holder"]))
    if p["state"] == "acquired":
        acquire(module, p["path"], p["owner"], p["steal_from"])
    holder = read(p["path"])
    mine = holder is not None and holder.get("run_id") == p["owner"].get("run_id")
    if mine and not module.check_mode:
        os.unlink(p["path"])
    module.exit_json(changed=mine, released=mine)


if __name__ == "__main__":
    main()
