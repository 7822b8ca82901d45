#!/usr/bin/python
"""Run a client on the host detached from the connection and follow it one slice at a time."""

from __future__ import annotations

DOCUMENTATION = r"""
module: specsweep_job
short_description: Run a command detached and report its progress in slices, then its result
description:
  - The first call starts O(argv) (never through a shell) in a new session, with stdout and stderr
    in files next to O(path), and records it under O(token). Each call then follows it for up to
    O(slice_s) and returns C(done=false) with the last line the command wrote to stderr as
    C(progress), or its result once it has exited; C(until) repeats the call. The command runs on
    while Ansible is between two calls, so the slices cost it no time.
  - A recorded job of another O(token) (a run that died) is stopped first (only its process group,
    which this module started) and replaced.
  - A non-zero exit fails with C(rc), C(stdout) and C(stderr), like M(ansible.builtin.command).
  - With O(server_pidfile) (the specsweep_server record) it also watches the server the command measures.
    When the server has exited while the command runs (or the command failed after it did), the command is
    stopped and the call fails with C(cause=server_exited), or the cause its log names (specsweep_logs, e.g.
    C(out_of_memory)), or C(oom_killed) when the kernel's OOM killer names it (specsweep_kernel), a C(msg)
    that gives the server's exit status or signal, the command's last progress line (the level it measured)
    and the log's (or the kernel's) line, C(exit), C(log_tail) (of O(server_log)), and what the command
    printed so far (specsweep_bench.py prints its finished runs when stopped).
  - With O(lease_path) each call renews this run's lease on the host lock (see specsweep_server), and the
    first records the client's pid record in it (C(client)); releasing the lock stops the client first.
options:
  argv: {type: list, elements: str, required: true, description: Command to run.}
  path:
    type: path
    required: true
    description: "Prefix of the job's files: .job (record), .stdout, .stderr, .rc."
  token:
    type: str
    required: true
    description: Names this measurement; a call with the recorded token follows that job, not a new one.
  slice_s: {type: float, default: 30, description: Seconds one call follows the job before it reports.}
  timeout_s: {type: float, default: 7200, description: Seconds after which the job is stopped and fails.}
  server_pidfile: {type: path, description: Pid record of the server under test (specsweep_server).}
  server_log: {type: path, description: That server's log, whose tail a server_exited failure returns.}
  lease_path: {type: path, description: The host lock file whose lease this call renews.}
  run_id: {type: str, description: This run's id, as the lock records it; required with lease_path.}
author: specsweep
"""

import os
import subprocess
import sys
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.specsweep_kernel import death_cause
from ansible.module_utils.specsweep_logs import classify_failure
from ansible.module_utils.specsweep_proc import (
    proc_start_ticks,
    read_pidfile,
    record_alive,
    stop_group,
    tail_lines,
    write_json_atomic,
)
from ansible.module_utils.specsweep_supervisor import (
    describe_exit,
    record_started,
    renew_lease,
    server_exit,
    server_running,
)

# Runs the command and writes its exit status atomically: the detached job outlives this module,
# and its status is read by a later call.
WRAPPER = (
    "import os, subprocess, sys\n"
    "rc = subprocess.call(sys.argv[2:])\n"
    "with open(sys.argv[1] + '.tmp', 'w') as f:\n"
    "    f.write(str(rc))\n"
    "os.replace(sys.argv[1] + '.tmp', sys.argv[1])\n"
)
SUFFIXES = ("job", "stdout", "stderr", "rc")


def read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def outputs(files: dict) -> dict:
    """What the job printed, for a finished (or failed) call; rc -1 until its status is known."""
    return {"done": True, "rc": -1, "stdout": read_text(files["stdout"]).rstrip("\n"),
            "stderr": read_text(files["stderr"]).rstrip("\n")}  # fmt: skip


def start(files: dict, argv: list, token: str) -> dict:
    """Start argv detached under the wrapper; record and return its pid record."""
    for path in files.values():
        if os.path.exists(path):
            os.unlink(path)
    os.makedirs(os.path.dirname(files["job"]) or ".", exist_ok=True)
    # Files, not pipes: the job outlives this module and its connection.
    with open(files["stdout"], "wb") as out, open(files["stderr"], "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", WRAPPER, files["rc"], *argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
            close_fds=True,
        )
    record = {"token": token, "pid": proc.pid, "start_ticks": proc_start_ticks(proc.pid), "argv": argv,
              "started_at": time.time()}  # fmt: skip
    write_json_atomic(files["job"], record)
    return record


def server_gone(pidfile: str) -> dict | None:
    """None while the server of `pidfile` runs; else how it ended: its exit record and words for it."""
    record = read_pidfile(pidfile)
    if record is not None and server_running(record):
        return None
    ended = server_exit(pidfile) if record is not None else None
    words = describe_exit(ended) if ended else "status unknown: no exit recorded in " + pidfile
    return {"exit": ended, "words": words, "record": record}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "argv": {"type": "list", "elements": "str", "required": True},
            "path": {"type": "path", "required": True},
            "token": {"type": "str", "required": True},
            "slice_s": {"type": "float", "default": 30.0},
            "timeout_s": {"type": "float", "default": 7200.0},
            "server_pidfile": {"type": "path"},
            "server_log": {"type": "path"},
            "lease_path": {"type": "path"},
            "run_id": {"type": "str"},
        },
        required_by={"lease_path": ("run_id",)},
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode:
        module.exit_json(changed=False, done=True, rc=0, stdout="", skipped_in_check_mode=True)
    files = {suffix: f"{p['path']}.{suffix}" for suffix in SUFFIXES}
    record = read_pidfile(files["job"])
    if record is None or record.get("token") != p["token"]:
        if record is not None:
            stop_group(record, 10.0)
        record = start(files, p["argv"], p["token"])
        if p["lease_path"]:
            # The lock names the client: a release (an interrupted run's, by hand) stops it first.
            record_started(p["lease_path"], p["run_id"], "client", record)

    def server_exited(ended: dict) -> None:
        stop_group(record, 10.0)  # before reading its output: it may flush on SIGTERM
        lines = tail_lines(p["server_log"]) if p["server_log"] else []
        # Its log names why, as at load (a CUDA OOM aborts: signal 6 alone says little), or the
        # kernel's (the OOM killer's SIGKILL leaves nothing in the log).
        cause, evidence = death_cause(classify_failure(lines), ended["exit"], ended["record"])
        # The client's last progress line names the level it was measuring ("repeat 2/3 at concurrency 4").
        at = next((line for line in reversed(tail_lines(files["stderr"])) if line.startswith("repeat ")), "")
        msg = f"server exited ({ended['words']}) during benchmark" + (f", {at}" if at else "")
        module.fail_json(
            msg=msg if cause == "unknown" else f"{msg}: {cause}: {evidence}",
            cause="server_exited" if cause == "unknown" else cause,
            exit=ended["exit"],
            log_tail=lines,
            **outputs(files),
        )

    slice_end = time.monotonic() + p["slice_s"]
    next_renewal = 0.0
    while True:
        if p["lease_path"] and time.monotonic() >= next_renewal:
            renew_lease(p["lease_path"], p["run_id"])
            next_renewal = time.monotonic() + 1.0
        elapsed = round(time.time() - record["started_at"], 1)
        alive = record_alive(record)  # before the status file: the job writes it, then exits
        ended = server_gone(p["server_pidfile"]) if p["server_pidfile"] else None
        if os.path.exists(files["rc"]):
            result = {**outputs(files), "rc": int(read_text(files["rc"]) or -1), "elapsed_s": elapsed,
                      "pid": record["pid"]}  # fmt: skip
            if result["rc"] != 0 and ended is not None:
                server_exited(ended)
            if result["rc"] != 0:
                module.fail_json(msg="non-zero return code", **result)
            module.exit_json(changed=False, **result)
        if ended is not None:
            server_exited(ended)
        if not alive:
            module.fail_json(msg="the job was killed before it finished", **outputs(files))
        if elapsed > p["timeout_s"]:
            stop_group(record, 10.0)
            module.fail_json(msg=f"still running after {p['timeout_s']:.0f} s: stopped", **outputs(files))
        if time.monotonic() >= slice_end:
            progress = (tail_lines(files["stderr"], 1) or [""])[-1]
            module.exit_json(
                changed=False, done=False, progress=progress, elapsed_s=elapsed, pid=record["pid"]
            )
        time.sleep(0.25)


if __name__ == "__main__":
    main()
