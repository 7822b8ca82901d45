#!/usr/bin/python
"""Wait until a server is healthy and generates, or fail fast when it died."""

from __future__ import annotations

DOCUMENTATION = r"""
module: specsweep_wait
short_description: Poll an inference server's health endpoint while watching its process
description:
  - Polls O(url)/health every O(poll_interval_s) like M(ansible.builtin.uri) with retries would, and
    also watches the server process (pidfile or systemd unit), so a server that died while loading
    fails within a poll interval instead of waiting out the timeout.
  - Once health answers 200 it proves generation works with one tiny request.
  - Returns C(ready=false) after O(slice_s) seconds of loading so the caller can print progress and
    call again (use C(until)); fails once the server is older than O(timeout_s).
options:
  engine: {type: str, choices: [llama_cpp, sglang], required: true, description: Engine API dialect.}
  url: {type: str, required: true, description: Base URL of the server.}
  pidfile: {type: path, description: Pid record written by specsweep_server (nohup launcher).}
  unit: {type: str, description: systemd unit name (systemd launcher).}
  log_path: {type: path, description: Server log, for the loading phase and the failure cause.}
  timeout_s: {type: float, required: true, description: Give up when the server is older than this.}
  slice_s: {type: float, default: 30, description: Return with ready=false after this long.}
  poll_interval_s: {type: float, default: 0.25, description: Seconds between polls.}
  api_key: {type: str, no_log: true, description: Bearer token, when the server requires one.}
author: specsweep
"""

import json
import subprocess
import time
import urllib.error
import urllib.request

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.specsweep_logs import classify_failure, loading_phase
from ansible.module_utils.specsweep_proc import (
    proc_age_s,
    proc_start_ticks,
    read_pidfile,
    record_alive,
    tail_lines,
)

# One-token request that proves the model generates, per engine: (path, body).
PROBE = {
    "llama_cpp": ("/completion", {"prompt": "Hello", "n_predict": 1, "temperature": 0}),
    "sglang": (
        "/generate",
        {"text": "Hello", "sampling_params": {"max_new_tokens": 1, "temperature": 0}},
    ),
}


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


def unit_start_ticks(unit: str) -> int | None:
    """Start ticks of a systemd unit's main process; None when the unit is not running."""
    out = subprocess.run(
        ["systemctl", "show", "--property=ActiveState,MainPID", unit],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    pid = int(props.get("MainPID") or 0)
    if props.get("ActiveState") not in ("active", "activating", "reloading") or pid == 0:
        return None
    return proc_start_ticks(pid)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "engine": {"type": "str", "choices": list(PROBE), "required": True},
            "url": {"type": "str", "required": True},
            "pidfile": {"type": "path"},
            "unit": {"type": "str"},
            "log_path": {"type": "path"},
            "timeout_s": {"type": "float", "required": True},
            "slice_s": {"type": "float", "default": 30.0},
            "poll_interval_s": {"type": "float", "default": 0.25},
            "api_key": {"type": "str", "no_log": True},
        },
        required_one_of=[("pidfile", "unit")],
        mutually_exclusive=[("pidfile", "unit")],
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode:
        module.exit_json(changed=False, ready=True, skipped_in_check_mode=True)
    base = p["url"].rstrip("/")
    probe_path, probe_body = PROBE[p["engine"]]
    record = read_pidfile(p["pidfile"]) if p["pidfile"] else None

    def started_ticks() -> int | None:
        if p["unit"]:
            return unit_start_ticks(p["unit"])
        return record["start_ticks"] if record_alive(record) else None

    def log_tail() -> list[str]:
        return tail_lines(p["log_path"]) if p["log_path"] else []

    slice_end = time.monotonic() + p["slice_s"]
    last = ""
    while True:
        ticks = started_ticks()
        if ticks is None:
            lines = log_tail()
            cause, evidence = classify_failure(lines)
            module.fail_json(
                msg=f"server exited while loading ({cause}): {evidence}",
                cause=cause,
                log_tail=lines,
                ready=False,
                noticed_at=time.time(),
            )
        age = proc_age_s(ticks)
        status, _ = http(base + "/health", p["api_key"])
        if status == 200:
            health_ok_at = time.time()
            probe_status, probe_text = http(base + probe_path, p["api_key"], probe_body, timeout=60.0)
            if probe_status == 200:
                module.exit_json(
                    changed=False,
                    ready=True,
                    elapsed_s=round(age, 3),
                    health_ok_at=health_ok_at,
                    ready_at=time.time(),
                )
            last = f"health 200 but generation answered {probe_status}: {probe_text[:200]}"
        else:
            last = f"health answered {status or 'nothing'}"
        if age > p["timeout_s"]:
            lines = log_tail()
            module.fail_json(
                msg=f"server not healthy after {age:.0f} s (timeout {p['timeout_s']:.0f} s); last: {last}",
                cause="timeout",
                log_tail=lines,
                ready=False,
            )
        if time.monotonic() >= slice_end:
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
