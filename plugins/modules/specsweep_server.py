#!/usr/bin/python
"""Start or stop one inference server detached from the Ansible connection."""

from __future__ import annotations

DOCUMENTATION = r"""
module: specsweep_server
short_description: Start or stop an inference server as a detached process with a pidfile
description:
  - C(started) runs O(argv) (never through a shell) in a new session with stdin from /dev/null and
    stdout/stderr written to a fresh O(log_path), and records its pid and kernel start time in O(pidfile).
  - It refuses to start when O(port) is already taken by a process it did not start.
  - C(stopped) signals only the process group recorded in O(pidfile), waits until it is gone and
    O(port) is free, then removes the pidfile.
options:
  state: {type: str, choices: [started, stopped], required: true, description: Desired state.}
  argv: {type: list, elements: str, description: Command to run; required for started.}
  env: {type: dict, default: {}, description: Extra environment for the server.}
  pidfile: {type: path, required: true, description: Where the pid record lives.}
  log_path: {type: path, description: Server log file; required for started.}
  chdir: {type: path, description: Working directory of the server.}
  host: {type: str, default: 127.0.0.1, description: Address the server listens on.}
  port: {type: int, required: true, description: Port the server listens on.}
  stop_timeout_s: {type: float, default: 30, description: Seconds to wait after SIGTERM before SIGKILL.}
  replace:
    type: bool
    default: false
    description: Restart a running server of ours even when its argv is the same (fresh per measurement).
author: specsweep
"""

import os
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.specsweep_proc import (
    port_in_use,
    proc_start_ticks,
    read_pidfile,
    record_alive,
    stop_group,
    wait_until,
    write_json_atomic,
)

# Variables a server needs from the launching environment; everything else is explicit.
INHERITED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "LD_LIBRARY_PATH")


def stop(module: AnsibleModule, record: dict) -> None:
    """Terminate the recorded process group and wait until it and the port are gone."""
    p = module.params
    pid = record["pid"]
    if not stop_group(record, p["stop_timeout_s"]):
        module.fail_json(msg=f"server pid {pid} survived SIGKILL", pid=pid)
    if not wait_until(lambda: not port_in_use(p["host"], p["port"]), p["stop_timeout_s"]):
        module.fail_json(msg=f"port {p['port']} still in use after server pid {pid} exited")


def start(module: AnsibleModule) -> dict:
    """Launch argv detached and record it; returns the pid record."""
    p = module.params
    env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    env.update({str(k): str(v) for k, v in p["env"].items()})
    os.makedirs(os.path.dirname(p["log_path"]) or ".", exist_ok=True)
    # A fresh log per launch: the loading phase and the failure cause are read from it.
    with open(p["log_path"], "wb") as log, open(os.devnull, "rb") as devnull:
        proc = subprocess.Popen(
            p["argv"],
            stdin=devnull,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=p["chdir"],
            start_new_session=True,
            close_fds=True,
        )
    record = {
        "pid": proc.pid,
        "start_ticks": proc_start_ticks(proc.pid),
        "argv": p["argv"],
        "log_path": p["log_path"],
        "started_at": time.time(),
    }
    write_json_atomic(p["pidfile"], record)
    return record


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {
                "type": "str",
                "choices": ["started", "stopped"],
                "required": True,
            },
            "argv": {"type": "list", "elements": "str"},
            "env": {"type": "dict", "default": {}},
            "pidfile": {"type": "path", "required": True},
            "log_path": {"type": "path"},
            "chdir": {"type": "path"},
            "host": {"type": "str", "default": "127.0.0.1"},
            "port": {"type": "int", "required": True},
            "stop_timeout_s": {"type": "float", "default": 30.0},
            "replace": {"type": "bool", "default": False},
        },
        required_if=[("state", "started", ("argv", "log_path"))],
        supports_check_mode=True,
    )
    p = module.params
    record = read_pidfile(p["pidfile"])
    alive = record_alive(record)

    if p["state"] == "stopped":
        if module.check_mode or not alive:
            if not alive and record and not module.check_mode:
                os.unlink(p["pidfile"])
            module.exit_json(changed=alive, pid=record and record["pid"])
        stop(module, record)
        os.unlink(p["pidfile"])
        module.exit_json(changed=True, pid=record["pid"])

    if alive and record.get("argv") == p["argv"] and not p["replace"]:
        module.exit_json(changed=False, **record)
    if module.check_mode:
        module.exit_json(changed=True)
    if alive:
        stop(module, record)  # ours, but launched with other flags: replace it
    if port_in_use(p["host"], p["port"]):
        module.fail_json(
            msg=(
                f"port {p['port']} on {p['host']} is already in use by a process this suite did not "
                "start; it was left untouched. Stop it or choose another port."
            ),
            cause="port_in_use",
        )
    module.exit_json(changed=True, **start(module))


if __name__ == "__main__":
    main()
