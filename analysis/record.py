"""Write what a sweep produced: one fact per (host, config), and the plan.

The playbook pipes a JSON payload into `python -m analysis record-fact|record-plan`;
this module turns it into schema objects (so a malformed fact fails here, loudly,
not in next week's report), redacts secrets and writes atomically.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from analysis.schema import (
    REDACTED,
    SCHEMA_VERSION,
    Fact,
    Failure,
    from_dict,
    redact_argv,
    redact_env,
    to_dict,
)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON through a temp file and rename: a reader never sees half a document."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _failure(raw: dict[str, Any], bench: dict[str, Any] | None) -> Failure:
    """A Failure from the phase the config was in and the failed task's result."""
    result = raw.get("result") or {}
    phase = str(raw.get("phase") or "sweep")
    cause = result.get("cause") or (bench or {}).get("error_cause") or f"{phase}_failed"
    # The client's own error says more than the command module's "non-zero return code".
    message = str((bench or {}).get("error") or result.get("msg") or "failed")
    tail = result.get("log_tail") or raw.get("log_tail") or []
    return Failure(phase=phase, cause=str(cause), message=message.strip(), log_tail=[str(x) for x in tail])


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
        "failure": failure and dataclasses.asdict(failure),
    }
    return from_dict(Fact, doc)


def build_plan(payload: dict[str, Any]) -> dict[str, Any]:
    """plan.json: every host's exact argv/env per config (secrets redacted), and its problems."""
    hosts = {}
    for host, plan in payload["hosts"].items():
        entries = [
            {"config": e["config"], "argv": redact_argv(e["argv"]), "env": redact_env(e["env"])}
            for e in plan.get("entries", [])
        ]
        hosts[host] = {**plan, "entries": entries, "warnings": plan.get("problems", [])}
        hosts[host].pop("problems", None)
        if "server" in plan:
            hosts[host]["server"] = {
                k: (REDACTED if k == "api_key" and v else v) for k, v in plan["server"].items()
            }
    return {"schema_version": SCHEMA_VERSION, "sweep_id": payload["sweep_id"], "configs": payload["configs"],
            "grid_warnings": payload.get("warnings", []), "hosts": hosts}  # fmt: skip


def describe_plan(plan: dict[str, Any]) -> str:
    """The plan as an operator reads it: one command line per host and config."""
    lines = [f"sweep {plan['sweep_id']}: {len(plan['configs'])} config(s)"]
    lines += [f"  grid: {w}" for w in plan["grid_warnings"]]
    for host, hp in plan["hosts"].items():
        lines.append(f"{host} ({hp.get('engine', '?')}):")
        lines += [f"  WARNING: {w}" for w in hp["warnings"]]
        for entry in hp["entries"]:
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(entry["env"].items()))
            lines.append(f"  {entry['config']['id']}: {env + ' ' if env else ''}{shlex.join(entry['argv'])}")
    return "\n".join(lines)


def _record_fact(args: argparse.Namespace) -> int:
    fact = build_fact(json.load(sys.stdin))
    write_json_atomic(Path(args.out), to_dict(fact))
    print(f"{fact.host}/{fact.config.id}: {fact.status} -> {args.out}")
    return 0


def _record_plan(args: argparse.Namespace) -> int:
    payload = json.load(sys.stdin)
    plan = build_plan(payload)
    folder = Path(args.out).parent
    # What the sweep was asked to do, next to the plan: `-e resume=ID` and people read it.
    write_json_atomic(folder / "sweep.json", payload["sweep"])
    # Shard claims and search probes are atomic mkdirs under this run's folder.
    (folder / ".claims" / payload["sweep"]["run_id"]).mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(args.out), plan)
    print(describe_plan(plan))
    print(f"plan written to {args.out}")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register record-fact and record-plan (used by the playbook, not by people)."""
    fact = subparsers.add_parser("record-fact", help="write one fact from the playbook's JSON on stdin")
    fact.add_argument("--out", required=True)
    fact.set_defaults(func=_record_fact)
    plan = subparsers.add_parser("record-plan", help="write sweep.json and plan.json (JSON on stdin)")
    plan.add_argument("--out", required=True)
    plan.set_defaults(func=_record_plan)


def main(argv: list[str] | None = None) -> int:
    """`python -m analysis.record ...`: the playbook's writer without the report's heavy imports."""
    parser = argparse.ArgumentParser(prog="python -m analysis.record", description=__doc__.splitlines()[0])
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
