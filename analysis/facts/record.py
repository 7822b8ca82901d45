"""Write what a sweep produced: one fact per (host, config), and the plan.

The playbook hands its payload to the `specsweep_results` action (plugins/action), which calls
this module in the ansible-playbook process; it turns the payload into schema objects (so a
malformed fact fails here, loudly, not in next week's report), redacts secrets and writes atomically.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from analysis.facts.schema import (
    SCHEMA_VERSION,
    Fact,
    Failure,
    from_dict,
    to_dict,
)
from analysis.redact import redact_argv, redact_env

# Room a fact may take: one is ~120 KB at 3 load levels x 3 repeats (the H200 run's); texts grow with
# max_tokens. The plan files and the report's own come on top.
FACT_BUDGET = 1 << 20
SWEEP_BUDGET = 16 << 20
# A fact kept on its host when the controller could not write it: <run_dir>/<sweep_id>.<name> + this.
KEPT_SUFFIX = ".fact.json"


def space_problem(folder: Path, facts: int) -> str | None:
    """Why `folder` (or the nearest folder above it that exists) cannot hold a sweep of `facts` facts
    (its free space), or None. Checked at plan time: a full disk must not be found by a measurement."""
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    free = shutil.disk_usage(existing).free
    need = facts * FACT_BUDGET + SWEEP_BUDGET
    if free >= need:
        return None
    return (
        f"results_dir: {existing} has {free / 2**20:.1f} MiB free, and this sweep's {facts} fact(s) need "
        f"about {need / 2**20:.0f} MiB; free some space or give another -e results_dir"
    )


def _failure(raw: dict[str, Any], bench: dict[str, Any] | None) -> Failure:
    """A Failure from the phase the config was in and the failed task's result."""
    result = raw.get("result") or {}
    phase = str(raw.get("phase") or "sweep")
    cause = result.get("cause") or (bench or {}).get("error_cause") or f"{phase}_failed"
    # The client's own error says more than the job's "non-zero return code", but not more than the
    # server's death it saw as refused connections ("server exited (signal 9: SIGKILL) ...", or a
    # cause its log names); a death carries the server's exit record.
    died = result.get("cause") == "server_exited" or "exit" in result
    client = None if died else (bench or {}).get("error")
    message = str(client or result.get("msg") or "failed")
    tail = result.get("log_tail") or raw.get("log_tail") or []
    # Where a benchmark stopped (the client names its level): the runs before it stay good.
    level = (bench or {}).get("level") or {}
    concurrency = level.get("concurrency") if phase == "benchmark" else None
    return Failure(phase=phase, cause=str(cause), message=message.strip(), log_tail=[str(x) for x in tail],
                   concurrency=concurrency if isinstance(concurrency, int) else None)  # fmt: skip


def build_fact(payload: dict[str, Any]) -> Fact:
    """The fact for one (host, config) from the playbook's payload."""
    bench = payload.get("benchmark_output") or None
    raw_failure = payload.get("failure")
    if bench is None and raw_failure:
        # A failed benchmark still printed its JSON (with the error and any finished runs).
        stdout = (raw_failure.get("result") or {}).get("stdout") or ""
        try:
            bench = json.loads(stdout) if stdout.startswith("{") else None
        except ValueError:
            bench = None
    failure = _failure(raw_failure, bench) if raw_failure else None
    if failure is None and bench and bench.get("error"):
        failure = Failure(phase="benchmark", cause="benchmark_error", message=str(bench["error"]))
    timings = dict(payload["timings"])
    if timings.get("ready_at") is not None:
        timings["bench_s"] = float(timings["finished_at"]) - float(timings["ready_at"])
    launch = dict(payload["launch"])
    launch["argv"] = redact_argv([str(a) for a in launch["argv"]])
    launch["env"] = redact_env({str(k): str(v) for k, v in launch["env"].items()})
    engine = dict(payload["engine"])
    # The server's own report (SGLang /server_info) beats what the role knows from its pins.
    engine["version"] = (bench or {}).get("engine_version") or engine.get("version")
    doc = {
        "schema_version": SCHEMA_VERSION,
        "sweep_id": payload["sweep_id"],
        "host": payload["host"],
        "config": payload["config"],
        "engine": engine,
        "launch": launch,
        "host_facts": payload["host_facts"],
        "timings": timings,
        "status": "failed" if failure else "ok",
        "benchmark": (bench or {}).get("benchmark"),
        "runs": (bench or {}).get("runs") or [],
        "server_info": (bench or {}).get("server_info") or {},
        "suite": payload.get("suite") or {},
        "failure": failure and to_dict(failure),
        "launch_index": int(payload.get("launch_index") or 1),
        "launch_prior": payload.get("launch_prior"),
        "prefetch": payload.get("prefetch"),
    }
    return from_dict(Fact, doc)


def kept_name(sweep_id: str, fact_name: str) -> str:
    """The file, in the host's run dir, of a fact the controller could not write (a full results
    disk): beside the sweep's log folder, not in it, as a launch prunes old log folders."""
    return f"{sweep_id}.{fact_name}{KEPT_SUFFIX}"


def kept_pattern(sweep_id: str) -> str:
    """The shell pattern of a sweep's kept facts (a dotted sweep id's prefix may match too: the
    reader checks each fact's sweep_id)."""
    return kept_name(sweep_id, "*")
