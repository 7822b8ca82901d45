"""`recommend` subcommand: the config to deploy per load level, and the schedule files (SGLang's
adaptive config, vLLM's Dynamic SD schedule).

    python -m analysis recommend DIR [DIR...] [--format text|markdown|json] [--objective NAME]
        [--sla-ttft-p99-ms N] [--sla-itl-p99-ms N] [--adaptive-config FILE] [--vllm-dynamic-config FILE]
        [--mix chat=0.7,code=0.3]

JSON: one object per host group (sweep, host, engine, model; see analysis.report.recommend for
why), the object itself when there is one group, a list of them when there are several:
    {"sweep_id", "host", "engine", "model", "sla": {...}, "objective": "throughput",
     "by_concurrency": {"1": {"config", "score", "tok_s", "speedup_ci", "within_noise", "meets_sla",
                              "goodput_rps", "speedup_pct", "total_tok_s", "per_user_tok_s",
                              "reason", "adaptive", "level_reached", "achieved_concurrency",
                              "server_running", "queued", "verdict", "launches", "ci_basis",
                              "configs": {"<config>": {"verdict", "speedup_pct", "speedup_ci",
                                                      "launches", "ci_basis"}, ...}}, ...}}
objective: what the configs were ranked on (--objective; analysis.objectives), score the
chosen config's median of it (tok/s, or req/s for goodput); tok_s is the median decode tok/s per
request; speedup_pct and speedup_ci (the 95% interval, null for the baseline itself) are the
objective's over the baseline in %, meets_sla and goodput_rps null
without an SLA, adaptive null where no adaptive arm was measured at that level; level_reached
false where a config held under 90% of the level's concurrency in flight (null: not measured),
achieved_concurrency the chosen config's mean in flight as the client sent them, server_running as
the server ran them (null: the engine gave no count; level_reached uses it where given), queued true
where some config's server kept over 10% of the level in its queue (docs/results.md).
verdict: better | worse | within_noise against the baseline (null for the baseline itself);
launches: the launches behind it (the fewer side's); ci_basis: launches (interval over launch means),
launch_var (one launch, widened by the launch-to-launch variance this sweep measured), within_launch
(no config launched twice: the interval is within one launch, and the verdict allows the launch
spread measured on the reference machine; see analysis.report.compare.LAUNCH_CV_PRIOR).

Results measured with named workloads (-e workloads=...) add per host group
    "mix": {"chat": 0.7, "code": 0.3}, "by_workload": {"chat": {"by_concurrency": {...}}, ...}
and the top-level by_concurrency is then the answer for the mix (analysis.report.mix; --mix, else
the sweep's -e mix, else equal shares of the workloads measured), which --adaptive-config and
--vllm-dynamic-config also write the schedule for.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from analysis import objectives
from analysis.facts.options import add_load_options, load
from analysis.report import mix
from analysis.report.cli import build_tables, ranking
from analysis.report.compare import HOST_KEYS
from analysis.report.deploy import recommend_blocks
from analysis.report.recommend import (
    HOST_GROUP,
    ScheduleError,
    adaptive_schedule,
    adaptive_table,
    dynamic_schedule,
    recommend,
)
from analysis.report.render import layout
from analysis.report.sla import Sla, add_sla_options
from analysis.sweep.mix import MixError

EXIT_OK = 0
EXIT_USAGE = 2
FORMATS = ("text", "markdown", "json")
# The schedule files recommend writes: (option's dest, option, maker from the step table).
SCHEDULES = (
    ("adaptive_config", "--adaptive-config", adaptive_schedule),
    ("vllm_dynamic_config", "--vllm-dynamic-config", dynamic_schedule),
)


def add_parser(subparsers: Any) -> None:
    """Register `recommend` on the CLI's subparsers."""
    parser = subparsers.add_parser(
        "recommend",
        help="the config to deploy per concurrency level",
        description="Per host group and concurrency: the fastest config meeting the SLA whose verdict "
        "against the baseline is better (else the baseline), its speedup CI, the configs within noise of "
        "it, goodput, and "
        "whether SGLang's adaptive arm is at least as fast as the best static config.",
    )
    add_load_options(parser)
    parser.add_argument("--format", choices=FORMATS, default="text", help="what to print (default: text)")
    add_sla_options(parser)
    objectives.add_option(parser)
    parser.add_argument(
        "--adaptive-config", type=Path, metavar="FILE",
        help="also write SGLang's --speculative-adaptive-config: per measured concurrency, the best step "
        "count and those within noise of it (0: no speculation)",
    )  # fmt: skip
    parser.add_argument(
        "--vllm-dynamic-config", type=Path, metavar="FILE",
        help="also write vLLM's Dynamic SD schedule (num_speculative_tokens_per_batch_size, with "
        "num_speculative_tokens) to merge into --speculative-config: per measured concurrency, the "
        "recommended config's step count (0: no speculation)",
    )  # fmt: skip
    parser.add_argument(
        "--mix", metavar="W=SHARE,...",
        help="weigh the workloads by their share of requests, e.g. chat=0.7,code=0.3, and name the config "
        "for that mix (default: the sweep's -e mix, else equal shares of the workloads measured)",
    )  # fmt: skip
    parser.set_defaults(func=run)


def _number(value: Any) -> float | None:
    """A JSON number, or null for a missing one."""
    return None if value is None or pd.isna(value) else float(value)


def _flag(value: Any) -> bool | None:
    """A JSON boolean, or null for a missing one."""
    return None if value is None or pd.isna(value) else bool(value)


def _level(r: dict[str, Any], arm: dict[str, Any] | None) -> dict[str, Any]:
    """One level of one host group as JSON."""
    lo, hi = _number(r["speedup_ci_lo"]), _number(r["speedup_ci_hi"])
    adaptive = None
    if arm is not None:
        ci = [_number(arm["ci_lo"]), _number(arm["ci_hi"])]
        adaptive = {
            "config": arm["adaptive_config"],
            "tok_s": _number(arm["adaptive_tps"]),
            "best_static": arm["best_static"] if isinstance(arm["best_static"], str) else None,
            "vs_best_static_pct": _number(arm["diff_pct"]),
            "vs_best_static_ci": ci if None not in ci else None,
            "at_least_as_fast": _flag(arm["at_least_as_fast"]),
            "verdict": arm["verdict"],
        }
    return {
        "config": r["config"] if isinstance(r["config"], str) else None,
        "score": _number(r["score"]),
        "tok_s": _number(r["decode_tps"]),
        "speedup_ci": [lo, hi] if lo is not None and hi is not None else None,
        "within_noise": list(r["within_noise"]),
        "meets_sla": _flag(r["meets_sla"]),
        "goodput_rps": _number(r["goodput_rps"]),
        "speedup_pct": _number(r["speedup_pct"]),
        "total_tok_s": _number(r["total_tps"]),
        "per_user_tok_s": _number(r["user_tps"]),
        "reason": r["reason"],
        "adaptive": adaptive,
        **_verdict(r),
        "configs": {c["config"]: _verdict(c) for c in r["configs"]} if isinstance(r["configs"], list) else {},
        # false: some config did not hold this level (docs/load.md); null: not measured
        "level_reached": _flag(r["level_reached"]),
        "achieved_concurrency": _number(r["achieved_concurrency"]),
        "server_running": _number(r["server_running"]),
        # true: the server queued some of the level (docs/results.md); null: no server count
        "queued": _flag(r["queued"]),
    }


def _verdict(r: dict[str, Any]) -> dict[str, Any]:
    """A config's verdict against the baseline, the launches behind it and how its interval was made."""
    lo, hi = _number(r["speedup_ci_lo"]), _number(r["speedup_ci_hi"])
    out = {
        "verdict": r["verdict"] if isinstance(r["verdict"], str) else None,
        "launches": None if pd.isna(r["launches"]) else int(r["launches"]),
        "ci_basis": r["ci_basis"] if isinstance(r["ci_basis"], str) else None,
    }
    if "configs" in r:  # the level's own keys (speedup_pct, speedup_ci) are already there
        return out
    return {
        **out,
        "speedup_pct": _number(r["speedup_pct"]),
        "speedup_ci": [lo, hi] if lo is not None and hi is not None else None,
    }


def as_json(
    rec: pd.DataFrame,
    adaptive: pd.DataFrame,
    sla: Sla,
    mixed: pd.DataFrame | None = None,
    shares: dict[str, float] | None = None,
) -> Any:
    """The recommendation as the documented JSON (one object, or a list for several host groups);
    `mixed` is the mix's recommendation where the results name their workloads."""
    level = [*HOST_GROUP, "concurrency"]
    arms = {_key(a, level): a for a in adaptive.drop_duplicates(level).to_dict("records")}

    def levels(part: pd.DataFrame) -> dict[str, Any]:
        return {
            str(int(r["concurrency"])): _level(r, arms.get(_key(r, level))) for r in part.to_dict("records")
        }

    groups = []
    sla_json = {"ttft_p99_ms": sla.ttft_p99_ms, "itl_p99_ms": sla.itl_p99_ms}
    for key, part in rec.groupby(HOST_KEYS, dropna=False, sort=False):
        names = {**dict(zip(HOST_KEYS, key, strict=True)), "objective": part["objective"].iloc[0]}
        if mixed is None or part["workload"].isna().all():
            groups.append({**names, "sla": sla_json, "by_concurrency": levels(part)})
            continue
        mine = mixed[(mixed[HOST_KEYS] == pd.Series(names)[HOST_KEYS]).all(axis=1)]
        by_workload = {str(w): {"by_concurrency": levels(p)} for w, p in part.groupby("workload", sort=False)}
        groups.append({**names, "sla": sla_json, "mix": shares, "by_concurrency": levels(mine),
                       "by_workload": by_workload})  # fmt: skip
    return groups[0] if len(groups) == 1 else groups


def _key(row: dict[str, Any], columns: list[str]) -> tuple[Any, ...]:
    """A row's key, a missing value (an unnamed workload) as None so that keys compare equal."""
    return tuple(None if pd.isna(row[c]) else row[c] for c in columns)


def write_schedule(path: Path, schedule: dict[str, Any]) -> None:
    """Write a schedule file atomically, levels in numeric order (the engine reads it at start)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(schedule, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def run(args: argparse.Namespace) -> int:
    """Load, recommend, print; write the schedule files asked for (exit 2 when one cannot be made)."""
    try:
        sla, objective = ranking(args)
    except objectives.ObjectiveError as exc:
        print(f"analysis recommend: {exc}", file=sys.stderr)
        return EXIT_USAGE
    result = load(args)
    if result.runs.empty:
        print(f"no readable result facts under {' '.join(map(str, args.sweeps))}", file=sys.stderr)
        return EXIT_USAGE
    step = build_tables(result, sla=sla, objective=objective).step
    rec = recommend(step)
    adaptive = adaptive_table(step)
    try:
        mix_step, shares = mix.answer_table(
            step, args.mix, default=None if args.mix else mix.recorded(args.sweeps)
        )
    except MixError as exc:
        print(f"analysis recommend: {exc}", file=sys.stderr)
        return EXIT_USAGE
    mixed = None if shares is None else recommend(mix_step)
    if args.format == "json":
        sys.stdout.write(json.dumps(as_json(rec, adaptive, sla, mixed, shares), indent=2) + "\n")
    else:
        blocks = recommend_blocks(rec, adaptive, sla)
        if mixed is not None:
            blocks += recommend_blocks(mixed, adaptive.iloc[0:0], sla)
        sys.stdout.write(layout(blocks, args.format))
    for dest, option, make in SCHEDULES:
        path = getattr(args, dest)
        if path is None:
            continue
        try:
            schedule, warnings = make(mix_step)
        except ScheduleError as exc:
            print(f"analysis recommend: {option}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        for warning in warnings:
            print(f"analysis recommend: warning: {warning}", file=sys.stderr)
        write_schedule(path, schedule)
        print(f"wrote {path}", file=sys.stderr)
    return EXIT_OK
