#!/usr/bin/python
"""Start or stop one inference server detached from the Ansible connection, under a supervisor."""

from __future__ import annotations

DOCUMENTATION = r"""
module: specsweep_server
short_description: Start or stop an inference server under a supervisor that records it and holds the lease
description:
  - C(started) launches a supervisor (stdlib Python, see module_utils/specsweep_supervisor.py) in a new
    session; it runs O(argv) (never through a shell) in its own process group, with stdin from /dev/null,
    stdout/stderr in a fresh O(log_path), the environment of O(env) plus a few inherited variables and the
    working directory O(chdir), and writes the pid record to O(pidfile) - the supervisor (group leader) and
    the server, each with its kernel start time. When the server exits, the supervisor adds C(exit) (its
    return code, or the signal that ended it) to that record, atomically.
  - With O(lease_path) the supervisor also holds this run's lease on the host lock. When the lock's mtime
    is older than O(lease_s) (nobody of the run renewed it, so its controller died or was cut off), or the
    lock is gone or another run's, it stops the server and the benchmark client of O(job_path), removes the
    lock if it is still this run's, and writes one line saying why into the server log. Every call with
    O(lease_path) renews the lease; C(started) refuses to launch when O(run_id) does not hold the lock, and
    records the server's group in it (C(server)), so that a later run can name a server this run left.
  - It refuses to start when O(port) is already taken by a process it did not start.
  - C(stopped) signals only the process group recorded in O(pidfile) (SIGTERM with SIGCONT, SIGKILL after
    O(stop_timeout_s), at once when a process of it is stopped or its leader is a zombie), waits until it is
    gone and O(port) is free, then removes the pidfile. With O(run_id), only a server that run started.
    The benchmark client of the record's O(job_path), when it still runs, is stopped first.
  - With O(keep_runs), C(started) keeps the newest O(keep_runs) log folders under O(runs_dir) (one per sweep)
    and removes older ones; only folders holding nothing but the suite's own files (server logs, wait
    progress, benchmark job files) are removed, never the one holding O(log_path).
options:
  state: {type: str, choices: [started, stopped], required: true, description: Desired state.}
  argv: {type: list, elements: str, description: Command to run; required for started.}
  env: {type: dict, default: {}, description: Extra environment for the server.}
  pidfile: {type: path, required: true, description: Where the pid record lives.}
  log_path: {type: path, description: Server log file; required for started.}
  chdir: {type: path, description: Working directory of the server.}
  host: {type: str, default: 127.0.0.1, description: Address the server listens on.}
  port: {type: int, required: true, description: Port the server listens on.}
  stop_timeout_s:
    type: float
    default: 30
    description: Seconds between SIGTERM and SIGKILL (also the supervisor's grace when the lease ends).
  replace:
    type: bool
    default: false
    description: Restart a running server of ours even when its argv is the same (fresh per measurement).
  lease_path: {type: path, description: The host lock file (specsweep_lock) whose mtime is the lease.}
  run_id: {type: str, description: This run's id, as the lock records it; required with lease_path.}
  lease_s:
    type: float
    default: 600
    description: Seconds without renewal after which the supervisor stops the server (> any one step).
  job_path:
    type: path
    description: specsweep_job path of this server's benchmark client, stopped with it when the lease ends.
  keep_runs: {type: int, description: Log folders (sweeps) to keep under runs_dir; older ones are removed.}
  runs_dir: {type: path, description: Folder holding one log folder per sweep; required with keep_runs.}
author: specsweep
"""

RETURN = r"""
pid: {type: int, description: The supervisor (leader of the server's process group).}
start_ticks: {type: int, description: Its kernel start time.}
server_pid: {type: int, returned: started, description: The server process.}
server_start_ticks: {type: int, returned: started, description: Its kernel start time.}
exit: {type: dict, returned: stopped, description: How the server ended (returncode, signal, signal_name).}
pruned_logs: {type: list, returned: started, description: Log folders removed for keep_runs.}
"""

import os
import re
import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.specsweep_proc import (
    group_alive,
    port_in_use,
    read_pidfile,
    stop_group,
    tail_lines,
    wait_until,
)
from ansible.module_utils.specsweep_supervisor import launch, record_started, renew_lease, stop_client

# Variables a server needs from the launching environment; everything else is explicit.
INHERITED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "LD_LIBRARY_PATH")
# The files the suite writes into a sweep's log folder, their temporary names included.
SUITE_FILE = re.compile(
    r".+\.(log|log\.progress|bench\.json(\.(job|stdout|stderr|rc))?|bench_serving\.jsonl)(\.tmp(\.\d+)?)?"
)
# Seconds the supervisor may take to start the server and write the record.
LAUNCH_TIMEOUT_S = 30.0


def stop(module: AnsibleModule, record: dict) -> None:
    """Terminate the recorded process group and wait until it and the port are gone."""
    p = module.params
    pid = record["pid"]
    # Its client first: it would go on sending to the port (a duration benchmark) after the stop.
    if record.get("job_path"):
        stop_client(read_pidfile(f"{record['job_path']}.job"))
    if not stop_group(record, p["stop_timeout_s"]):
        module.fail_json(msg=f"server pid {pid} survived SIGKILL", pid=pid)
    if not wait_until(lambda: not port_in_use(p["host"], p["port"]), p["stop_timeout_s"]):
        module.fail_json(msg=f"port {p['port']} still in use after server pid {pid} exited")


def start(module: AnsibleModule) -> dict:
    """Launch the supervisor, which starts argv and writes the record; returns the record."""
    p = module.params
    inherited = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    args = {
        "argv": p["argv"],
        "env": {**inherited, **{str(k): str(v) for k, v in p["env"].items()}},
        "cwd": p["chdir"],
        "pidfile": p["pidfile"],
        "log_path": p["log_path"],
        "stop_grace_s": p["stop_timeout_s"],
        "run_id": p["run_id"],
        "lease_path": p["lease_path"],
        "lease_s": p["lease_s"],
        "job_path": p["job_path"],
    }
    for folder in {os.path.dirname(p["log_path"]), os.path.dirname(p["pidfile"])}:
        os.makedirs(folder or ".", exist_ok=True)
    if os.path.exists(p["pidfile"]):
        os.unlink(p["pidfile"])  # the last server's record: its group is gone by now
    # A fresh log per launch: the loading phase and the failure cause are read from it.
    with open(p["log_path"], "wb") as log:
        supervisor = launch(args, log, inherited)

    def written() -> bool:
        record = read_pidfile(p["pidfile"])
        return (record is not None and record["pid"] == supervisor.pid) or supervisor.poll() is not None

    wait_until(written, LAUNCH_TIMEOUT_S)
    record = read_pidfile(p["pidfile"])
    if record is None or record["pid"] != supervisor.pid:
        lines = tail_lines(p["log_path"])
        module.fail_json(
            msg=f"the server did not start: {lines[-1] if lines else 'its supervisor wrote nothing'}",
            cause="launch_failed",
            log_tail=lines,
        )
    return record


def suite_folder(path: str) -> bool:
    """True for a folder holding only files the suite writes, a server log among them."""
    entries = list(os.scandir(path))
    return any(e.name.endswith(".log") for e in entries) and all(
        e.is_file(follow_symlinks=False) and SUITE_FILE.fullmatch(e.name) for e in entries
    )


def prune_logs(runs_dir: str, current: str, keep: int) -> list[str]:
    """Remove the log folders under `runs_dir` beyond the newest `keep` (by mtime, `current` counted
    among the kept and never removed); returns the removed folders."""
    folders = [
        (entry.stat(follow_symlinks=False).st_mtime, entry.path)
        for entry in os.scandir(runs_dir)
        if entry.is_dir(follow_symlinks=False) and entry.path != current and suite_folder(entry.path)
    ]
    removed = [path for _, path in sorted(folders, reverse=True)[keep - 1 :]]
    for path in removed:
        shutil.rmtree(path)
    return removed


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
            "lease_path": {"type": "path"},
            "run_id": {"type": "str"},
            "lease_s": {"type": "float", "default": 600.0},
            "job_path": {"type": "path"},
            "keep_runs": {"type": "int"},
            "runs_dir": {"type": "path"},
        },
        required_if=[("state", "started", ("argv", "log_path"))],
        required_by={"lease_path": ("run_id",), "keep_runs": ("runs_dir",)},
        supports_check_mode=True,
    )
    p = module.params
    if p["keep_runs"] is not None and p["keep_runs"] < 1:
        module.fail_json(
            msg=f"keep_runs must be 1 or more (the current sweep's logs are kept), not {p['keep_runs']}"
        )
    # Every call of the run renews its lease; a launch needs the lock to be this run's.
    leased = bool(p["lease_path"]) and not module.check_mode and renew_lease(p["lease_path"], p["run_id"])
    record = read_pidfile(p["pidfile"])
    alive = group_alive(record)

    if p["state"] == "stopped":
        if alive and p["run_id"] and record.get("run_id") != p["run_id"]:
            module.exit_json(
                changed=False, pid=record["pid"], msg=f"started by run {record.get('run_id')}: left alone"
            )
        if module.check_mode or not alive:
            if not alive and record and not module.check_mode:
                os.unlink(p["pidfile"])
            module.exit_json(changed=alive, pid=record and record["pid"], exit=record and record.get("exit"))
        stop(module, record)
        # The supervisor recorded the exit before it went.
        ended = read_pidfile(p["pidfile"]) or record
        os.unlink(p["pidfile"])
        module.exit_json(changed=True, pid=record["pid"], exit=ended.get("exit"))

    if alive and record.get("argv") == p["argv"] and not p["replace"]:
        module.exit_json(changed=False, **record)
    if module.check_mode:
        module.exit_json(changed=True)
    if p["lease_path"] and not leased:
        module.fail_json(
            msg=f"run {p['run_id']} does not hold {p['lease_path']} (gone or another run's): not started",
            cause="lease_lost",
        )
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
    pruned = []
    if p["keep_runs"] is not None:
        current = os.path.dirname(os.path.abspath(p["log_path"]))
        if os.path.dirname(current) == os.path.abspath(p["runs_dir"]):
            pruned = prune_logs(p["runs_dir"], current, p["keep_runs"])
        else:
            module.warn(
                f"keep_runs: {p['log_path']} is not in a folder of {p['runs_dir']}; nothing was pruned"
            )
    started = start(module)
    if p["lease_path"]:
        # The lock names the server too: a later run's preflight tells a leftover of this run apart.
        keys = ("pid", "start_ticks", "server_pid", "server_start_ticks")
        record_started(p["lease_path"], p["run_id"], "server", {k: started[k] for k in keys})
    module.exit_json(changed=True, pruned_logs=pruned, **started)


if __name__ == "__main__":
    main()
