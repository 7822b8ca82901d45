#!/usr/bin/python
"""Wait until a server is healthy and generates, or fail fast when it died."""

from __future__ import annotations

DOCUMENTATION = r"""
module: specsweep_wait
short_description: Poll an inference server's health endpoint while watching its process
description:
  - Polls O(url)/health every O(poll_interval_s) like M(ansible.builtin.uri) with retries would, and
    also watches the server process (pidfile or systemd unit), so a server that died while loading
    fails within a poll interval instead of waiting out the timeout; with a pidfile the message gives
    its exit status or signal, as its supervisor recorded it (C(exit)).
  - A hung server fails with C(cause=hung) too - at once when a process of its group is stopped
    (state T or t, e.g. SIGSTOP), and after O(stall_s) when its log has not grown and its process
    group (the supervisor left out) has used no CPU time. The stall is measured across calls (the
    last progress is kept in C(O(log_path).progress)).
  - Once health answers 200 it proves generation works with one tiny request. A server that answers it
    with 5xx every time, at least 3 times over 3 seconds (specsweep_logs), fails
    with C(cause=generation_error) and the last body (C(response)), instead of waiting out O(timeout_s);
    the status decides, not the body, which may hold a request id or a time.
  - Returns C(ready=false) after O(slice_s) seconds of loading so the caller can print progress and
    call again (use C(until)); fails once the server is older than O(timeout_s).
  - With O(lease_path) each call renews this run's lease on the host lock (see specsweep_server).
options:
  engine:
    type: str
    required: true
    description:
      - Engine API dialect, as analysis.engines names it (the plan sets it); one of the keys of
        module_utils/specsweep_engines.py ENGINES, which the module checks it against.
  url: {type: str, required: true, description: Base URL of the server.}
  pidfile: {type: path, description: Pid record written by specsweep_server (nohup launcher).}
  unit: {type: str, description: systemd unit name (systemd launcher).}
  log_path: {type: path, description: Server log, for the loading phase, the failure cause, the stall check.}
  timeout_s: {type: float, required: true, description: Give up when the server is older than this.}
  slice_s: {type: float, default: 30, description: Return with ready=false after this long.}
  poll_interval_s: {type: float, default: 0.25, description: Seconds between polls.}
  stall_s:
    type: float
    default: 300
    description: Seconds without log output and CPU time after which a loading server is hung; 0 turns it off.
  api_key: {type: str, no_log: true, description: Bearer token, when the server requires one.}
  lease_path: {type: path, description: The host lock file whose lease this call renews.}
  run_id: {type: str, description: This run's id, as the lock records it; required with lease_path.}
author: specsweep
"""

RETURN = r"""
ready: {type: bool, description: The server answers health and generates.}
cause:
  type: str
  returned: failed
  description: >-
    What the log shows for a server that exited (specsweep_logs), oom_killed when the kernel's OOM
    killer ended it (specsweep_kernel), hung, or timeout.
exit: {type: dict, returned: exited, description: The supervisor's exit record (returncode, signal...).}
process_state: {type: str, returned: a stopped process, description: Its /proc state letter.}
response: {type: str, returned: generation_error, description: The body of that 5xx answer.}
stalled_s: {type: float, returned: a stall, description: Seconds without log output or CPU time.}
"""

import json
import os
import subprocess
import time
import urllib.error
import urllib.request

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.specsweep_engines import ENGINES
from ansible.module_utils.specsweep_kernel import death_cause
from ansible.module_utils.specsweep_logs import classify_failure, generation_failure, loading_phase
from ansible.module_utils.specsweep_proc import (
    DEAD_STATES,
    STOPPED_STATES,
    group_members,
    proc_age_s,
    proc_stat,
    read_pidfile,
    tail_lines,
    write_json_atomic,
)
from ansible.module_utils.specsweep_supervisor import describe_exit, renew_lease, server_exit, server_running

# What usually puts a process in a stopped state.
STOPPED_HINT = {"T": "e.g. SIGSTOP", "t": "traced by a debugger"}
# Seconds between two looks at the whole process group (a /proc scan) and the log size.
SAMPLE_S = 1.0


def http(url: str, api_key: str | None, body: dict | None = None, timeout: float = 5.0) -> tuple[int, str]:
    """(status, body text); status 0 when nothing answered."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read(4096).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(4096).decode("utf-8", "replace")
    except (OSError, ValueError):
        return 0, ""


def unit_server(unit: str) -> dict | None:
    """The main process of a running systemd unit (see nohup_server); None when it is not running."""
    out = subprocess.run(
        ["systemctl", "show", "--property=ActiveState,MainPID", unit],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    pid = int(props.get("MainPID") or 0)
    stat = proc_stat(pid) if pid else None
    if props.get("ActiveState") not in ("active", "activating", "reloading") or stat is None:
        return None
    if stat["state"] in DEAD_STATES:
        return None
    return {"pid": pid, "start_ticks": stat["start_ticks"], "pgid": stat["pgrp"], "skip": None}


def nohup_server(record: dict | None) -> dict | None:
    """The recorded server while it runs: its pid and start ticks, its process group, and the pid
    whose CPU time does not count (its supervisor); None once it has exited."""
    if record is None or not server_running(record):
        return None
    return {"pid": record["server_pid"], "start_ticks": record["server_start_ticks"], "pgid": record["pid"],
            "skip": record["pid"]}  # fmt: skip


def load_progress(path: str, server: dict) -> dict:
    """The last progress seen of this server (same pid and start time) by an earlier call, else now."""
    try:
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
        if (state["pid"], state["start_ticks"]) == (server["pid"], server["start_ticks"]):
            return state
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return {
        "pid": server["pid"],
        "start_ticks": server["start_ticks"],
        "marks": None,
        "progress_at": time.time(),
    }


def stalled_for(state: dict, marks: list) -> float:
    """Seconds since the log size or the CPU time last changed (`marks`), updating `state`."""
    if marks != state["marks"]:
        state.update(marks=marks, progress_at=time.time())
    return time.time() - state["progress_at"]


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "engine": {"type": "str", "choices": list(ENGINES), "required": True},
            "url": {"type": "str", "required": True},
            "pidfile": {"type": "path"},
            "unit": {"type": "str"},
            "log_path": {"type": "path"},
            "timeout_s": {"type": "float", "required": True},
            "slice_s": {"type": "float", "default": 30.0},
            "poll_interval_s": {"type": "float", "default": 0.25},
            "stall_s": {"type": "float", "default": 300.0},
            "api_key": {"type": "str", "no_log": True},
            "lease_path": {"type": "path"},
            "run_id": {"type": "str"},
        },
        required_one_of=[("pidfile", "unit")],
        mutually_exclusive=[("pidfile", "unit")],
        required_by={"lease_path": ("run_id",)},
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode:
        module.exit_json(changed=False, ready=True, skipped_in_check_mode=True)
    base = p["url"].rstrip("/")
    probe_path, probe_body = ENGINES[p["engine"]]["probe"]
    record = read_pidfile(p["pidfile"]) if p["pidfile"] else None
    progress_path = f"{p['log_path']}.progress" if p["log_path"] and p["stall_s"] > 0 else None

    def watched() -> dict | None:
        return unit_server(p["unit"]) if p["unit"] else nohup_server(record)

    def log_tail() -> list[str]:
        return tail_lines(p["log_path"]) if p["log_path"] else []

    def hung(msg: str, **extra) -> None:
        module.fail_json(
            msg=msg, cause="hung", log_tail=log_tail(), ready=False, noticed_at=time.time(), **extra
        )

    def stopped(stat: dict, server: dict, age: float) -> None:
        state = stat["state"]
        whose = "" if stat["pid"] == server["pid"] else " (a process of its group)"
        where = f"pid {stat['pid']}{whose}, {age:.0f} s after launch"
        hung(
            f"server stopped (state {state}, {STOPPED_HINT[state]}) while loading: {where}",
            process_state=state,
        )

    slice_end = time.monotonic() + p["slice_s"]
    errors: dict = {}  # the run of 5xx answers to the probe (generation_failure)
    next_sample = 0.0
    progress = None
    stalled = 0.0
    last = ""
    while True:
        server = watched()
        if server is None:
            lines = log_tail()
            ended = server_exit(p["pidfile"]) if p["pidfile"] else None
            cause, evidence = death_cause(classify_failure(lines), ended, record)
            how = f", {describe_exit(ended)}" if ended else ""
            if ended and ended.get("reason"):
                how += f"; its supervisor stopped it: {ended['reason']}"
            module.fail_json(
                msg=f"server exited while loading ({cause}{how}): {evidence}",
                cause=cause,
                exit=ended,
                log_tail=lines,
                ready=False,
                noticed_at=time.time(),
            )
        age = proc_age_s(server["start_ticks"])
        stat = proc_stat(server["pid"])
        if stat is not None and stat["state"] in STOPPED_STATES:
            stopped(stat, server, age)
        if time.monotonic() >= next_sample:
            next_sample = time.monotonic() + SAMPLE_S
            if p["lease_path"]:
                renew_lease(p["lease_path"], p["run_id"])
            members = group_members(server["pgid"])
            for member in members:
                if member["state"] in STOPPED_STATES:
                    stopped(member, server, age)
            if progress_path:
                progress = progress or load_progress(progress_path, server)
                log_bytes = os.stat(p["log_path"]).st_size if os.path.exists(p["log_path"]) else -1
                cpu = sum(m["cpu_ticks"] for m in members if m["pid"] != server["skip"])
                stalled = stalled_for(progress, [log_bytes, cpu])
        status, _ = http(base + "/health", p["api_key"])
        if status == 200:
            health_ok_at = time.time()
            probe_status, probe_text = http(base + probe_path, p["api_key"], probe_body, timeout=60.0)
            if probe_status == 200:
                if progress_path and os.path.exists(progress_path):
                    os.unlink(progress_path)  # only a loading server has one
                module.exit_json(
                    changed=False,
                    ready=True,
                    elapsed_s=round(age, 3),
                    health_ok_at=health_ok_at,
                    ready_at=time.time(),
                )
            last = f"health 200 but generation answered {probe_status}: {probe_text[:200]}"
            broken = generation_failure(errors, probe_status, probe_text, time.monotonic())
            if broken:
                module.fail_json(
                    msg=broken,
                    cause="generation_error",
                    response=probe_text,
                    log_tail=log_tail(),
                    ready=False,
                    noticed_at=time.time(),
                )
        else:
            last = f"health answered {status or 'nothing'}"
        # Judged after health: a server that answers is not hung however quiet it is.
        if status != 200 and stalled >= p["stall_s"] > 0:
            seen = f"no log output and no CPU for {stalled:.0f} s (stall_s {p['stall_s']:g})"
            hung(f"server hung while loading: {seen}, {age:.0f} s after launch", stalled_s=round(stalled, 1))
        if age > p["timeout_s"]:
            lines = log_tail()
            module.fail_json(
                msg=f"server not healthy after {age:.0f} s (timeout {p['timeout_s']:.0f} s); last: {last}",
                cause="timeout",
                log_tail=lines,
                ready=False,
            )
        if time.monotonic() >= slice_end:
            if progress is not None:
                write_json_atomic(progress_path, progress)
            module.exit_json(
                changed=False,
                ready=False,
                elapsed_s=round(age, 1),
                phase=loading_phase(log_tail()) or "starting",
                last=last,
            )
        time.sleep(p["poll_interval_s"])


if __name__ == "__main__":
    main()
