#!/usr/bin/python
"""A per-host lock, so two sweeps never launch servers on the same host at once."""

from __future__ import annotations

DOCUMENTATION = r"""
module: specsweep_lock
short_description: Take, check or release the lock a sweep holds on a host
description:
  - C(acquired) creates O(path) atomically with O(owner). When another run holds it, nothing changes
    and the result has C(acquired=false), C(holder) and C(holder_age_s) (seconds since the holder last
    renewed its lease, on this host's clock). With O(steal_from) it replaces a holder whose run id is
    O(steal_from) (one the caller found dead), and only that holder.
  - With O(port), C(acquired) takes no lock while a process listens on O(port) (the engine's); the result
    has C(acquired=false) and C(port_holder) - the port, the processes holding it (pid, name and the
    systemd service it runs in; C(hidden) when one is not visible here, another user's or in another
    pid namespace) and, when they belong to a server or client the lock's holder recorded (a run that
    ended without stopping them), that run's C(run_id) and C(sweep_id), and C(supervised) when that
    server's supervisor still runs (it stops the server once the run's lease runs out). A dead holder's
    lock is then not taken over (it keeps naming what that run left), unless O(owner) resumes that
    holder's sweep and only what the holder started holds the port (the resume's launch stops its
    own sweep's server by its pidfile). Nothing is stopped here.
  - C(released) removes O(path) when O(owner) holds it, after stopping the benchmark client the lock
    records (C(client), see specsweep_job) if it still runs; another run's lock is left alone.
  - C(renewed) touches the mtime of O(path) when O(owner) holds it, the lease a server's supervisor
    watches (see specsweep_server), for a step that calls no other module of the run on this host for
    longer than the lease. The result has C(renewed), false when the lock is gone or another run's.
options:
  state: {type: str, choices: [acquired, released, renewed], required: true, description: What to do.}
  path: {type: path, required: true, description: Lock file on the host.}
  owner:
    type: dict
    required: true
    description: This run (the specsweep_run_owner filter) - run_id, sweep_id and its controller process.
  steal_from: {type: str, description: Run id of a dead holder to replace.}
  port: {type: int, description: The engine's port; a lock is not taken while a process listens on it.}
author: specsweep
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.specsweep_proc import (
    group_is_ours,
    port_listeners,
    proc_name,
    proc_stat,
    proc_unit,
    record_alive,
    write_json_atomic,
)
from ansible.module_utils.specsweep_supervisor import renew_lease, stop_client

STATES = ["acquired", "released", "renewed"]


def read(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"run_id": "unreadable lock file"}


def started_by(pid: int, holder: dict | None) -> str | None:
    """Which of the lock holder's recorded process groups (C(server), C(client)) `pid` belongs to."""
    stat = proc_stat(pid)
    for what in ("server", "client"):
        group = (holder or {}).get(what)
        recorded = isinstance(group, dict) and isinstance(group.get("pid"), int)
        if recorded and stat is not None and stat["pgrp"] == group["pid"] and group_is_ours(group):
            return what
    return None


def port_holder(port: int | None, holder: dict | None) -> dict | None:
    """Who listens on `port`, and whether the lock's holder started it; None when nobody does."""
    found = port_listeners(port) if port else {"pids": [], "hidden": False}
    if not found["pids"] and not found["hidden"]:
        return None
    processes = [
        {"pid": pid, "name": proc_name(pid), "unit": proc_unit(pid), "started_by": started_by(pid, holder)}
        for pid in found["pids"]
    ]
    left = holder is not None and any(p["started_by"] for p in processes)
    return {
        "port": port,
        "processes": processes,
        "hidden": found["hidden"],
        "run_id": holder.get("run_id") if left else None,
        "sweep_id": holder.get("sweep_id") if left else None,
        # Its supervisor still runs: it stops the server itself once that run's lease runs out.
        "supervised": left and record_alive((holder or {}).get("server")),
    }


def own_leftover(held: dict, holder: dict | None, owner: dict) -> bool:
    """The port is held only by what an ended run of this same sweep started: a resume takes the
    host over, and its launch stops that server by the sweep's own pidfile (specsweep_server)."""
    same = (
        holder is not None
        and owner.get("sweep_id") is not None
        and holder.get("sweep_id") == owner["sweep_id"]
    )
    return same and not held["hidden"] and all(p["started_by"] for p in held["processes"])


def refuse_a_held_port(module: AnsibleModule, port: int | None, holder: dict | None, owner: dict) -> None:
    """Take nothing while a process listens on the engine's port: the run's servers could not start,
    or would be measured beside a stranger's load; a resume of the sweep that left it excepted."""
    held = port_holder(port, holder)
    if held is not None and not own_leftover(held, holder, owner):
        module.exit_json(changed=False, acquired=False, holder=holder, port_holder=held)


def acquire(module: AnsibleModule, path: str, owner: dict, steal_from: str | None, port: int | None) -> None:
    record = {**owner, "acquired_at": time.time()}
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    holder = read(path)
    if holder is not None and holder.get("run_id") == owner["run_id"]:
        module.exit_json(changed=False, acquired=True, holder=holder)
    if holder is not None and steal_from is not None and holder.get("run_id") == steal_from:
        refuse_a_held_port(module, port, holder, owner)
        if not module.check_mode:
            write_json_atomic(path, record)
        module.exit_json(changed=True, acquired=True, stolen_from=holder)
    if holder is None:
        refuse_a_held_port(module, port, None, owner)
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
    try:
        age = time.time() - os.stat(path).st_mtime
    except OSError:
        age = None
    module.exit_json(changed=False, acquired=False, holder=holder, holder_age_s=age)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": STATES, "required": True},
            "path": {"type": "path", "required": True},
            "owner": {"type": "dict", "required": True},
            "steal_from": {"type": "str"},
            "port": {"type": "int"},
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["state"] == "acquired":
        acquire(module, p["path"], p["owner"], p["steal_from"], p["port"])
    if p["state"] == "renewed":
        renewed = not module.check_mode and renew_lease(p["path"], p["owner"].get("run_id"))
        module.exit_json(changed=False, renewed=renewed)
    holder = read(p["path"])
    mine = holder is not None and holder.get("run_id") == p["owner"].get("run_id")
    if mine and not module.check_mode:
        # A client of a duration benchmark would go on sending to the port of a host given back.
        stop_client(holder.get("client"))
        os.unlink(p["path"])
    module.exit_json(changed=mine, released=mine)


if __name__ == "__main__":
    main()
