"""What one config's run on one host produced, as the payload the fact writer takes.

The playbook hands over what its tasks registered (the launch handle, the readiness, the client's
output, the failed task's result); this decides the rest: where it stopped and why, and when.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from analysis.sweep.hostplan import HostPlan, Server, load


def phase(handle: Mapping[str, Any], ready: Mapping[str, Any]) -> str:
    """Where a failed config stopped: no launch handle yet = launch; not ready yet = load."""
    if not handle:
        return "launch"
    return "load" if not ready.get("ready") else "benchmark"


def payload(run: Mapping[str, Any], failed_result: Mapping[str, Any] | None, log_tail: list[str]) -> dict:
    """The fact writer's payload (analysis.facts.record.build_fact) for one config's run."""
    handle = run.get("handle") or {}
    ready = run.get("ready") or {}
    server = load(Server, run["server"])
    preflight = run.get("preflight") or {}
    failure = None
    if failed_result is not None:
        failure = {"phase": phase(handle, ready), "result": dict(failed_result), "log_tail": log_tail}
    return {
        "sweep_id": run["sweep_id"],
        "host": run["host"],
        "config": run["config"],
        "engine": {
            "name": server.engine,
            # The host's own report (SGLang's import in preflight) over the role's pin.
            "version": preflight.get("version") or server.version,
            "model": server.model,
            "launcher": handle.get("launcher") or "not launched",
            "model_identity": preflight.get("model_identity"),
        },
        "launch": {**run["launch"], "log_path": handle.get("log")},
        "host_facts": preflight.get("host_facts") or {"hostname": run["host"]},
        "timings": {
            "started_at": float(run["started_at"]),
            "ready_at": ready.get("ready_at"),
            "finished_at": time.time(),
            "load_s": ready.get("elapsed_s"),
        },
        "suite": run.get("suite") or {},
        "benchmark_output": run.get("benchmark_output"),
        "failure": failure,
        "launch_index": int(run.get("launch_index") or 1),
        "launch_prior": run.get("launch_prior"),
        "prefetch": prefetched(run.get("prefetch") or {}),
    }


def prefetched(result: Mapping[str, Any]) -> dict[str, Any] | None:
    """What specsweep_prefetch registered, as the fact keeps it; None where it did not run."""
    if "files" not in result:
        return None
    return {"files": result["files"], "bytes": result["bytes"], "missing": list(result.get("missing") or [])}


def stop_now(after: Mapping[str, Any]) -> bool:
    """Whether this launch's server stops now, once its fact is recorded.

    A good measurement's nohup server is left for the next launch to replace (its stop and the new
    start in one round trip; the end of the sweep stops the last one). A failure, a systemd unit,
    a multi-node pair or a step search (whose host may wait for others) stops now.
    after: `status` (the recorded fact's; None when none was), `launcher` (the handle's), `host`
    (the plan's: follows, followed_by) and `search` (a step search).
    """
    host = load(HostPlan, after["host"])
    kept = after.get("status") == "ok" and after.get("launcher") == "nohup"
    return not kept or host.follows is not None or bool(host.followed_by) or bool(after["search"])
