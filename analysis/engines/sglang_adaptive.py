"""SGLang's adaptive speculation (`--speculative-adaptive` with a schedule file) as one more config.

SGLang 0.5.23 (sglang/srt/speculative/adaptive_spec_params.py) reads the schedule with
`_load_adaptive_config` and refuses adaptive speculation for what `adaptive_unsupported_reason`
names; it then silently falls back to static speculation, so a sweep refuses those cases itself,
before any host is touched, with SGLang's own reason. What each release reads of the file is in
analysis.engines.sglang_releases.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analysis.engines import sglang_releases
from analysis.engines.base import BUILTIN_SCHEDULE, ScheduleError, Settings

VERSION_CHECKED = "0.5.23"
# adaptive_unsupported_reason() accepts these algorithms only.
ALGORITHMS = ("EAGLE", "EAGLE3")

# Server flags adaptive_unsupported_reason() refuses, with its words.
UNSUPPORTED_FLAGS = {
    "--enable-dp-attention": "attention DP is not supported (adaptive tier decisions are not synchronized "
    "across DP ranks)",
    "--enable-multi-layer-eagle": "enable_multi_layer_eagle=True is not supported (MultiLayerEagleWorkerV2 "
    "does not implement adaptive)",
    "--enable-two-batch-overlap": "enable_two_batch_overlap=True is not supported (adaptive state swap "
    "would discard the TboAttnBackend wrapper)",
    "--enable-pdmux": "enable_pdmux=True is not supported (adaptive state swap does not update "
    "decode_attn_backend_group)",
}


def load(path: str | Path) -> dict[str, Any]:
    """The schedule, checked as `_load_adaptive_config` checks it: digit-string batch-size keys,
    each with a non-empty `candidate_steps` list of ints >= 0."""
    try:
        schedule = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ScheduleError(f"{path}: cannot read it as JSON: {exc}") from exc
    if not isinstance(schedule, dict):
        raise ScheduleError(f"{path}: expected a JSON object keyed by batch size")
    entries = {k: v for k, v in schedule.items() if isinstance(k, str) and k.isdigit()}
    if not entries:
        raise ScheduleError(
            f"{path}: needs at least one integer-string batch-size key, e.g. "
            f'{{"1": {{"candidate_steps": [1, 3, 7]}}}}; got keys {list(schedule)}'
        )
    for key, entry in entries.items():
        steps = entry.get("candidate_steps") if isinstance(entry, dict) else None
        ok = isinstance(steps, list) and steps and all(type(s) is int and s >= 0 for s in steps)
        if not ok:
            why = f"candidate_steps must be a list of non-negative ints, got {steps!r}"
            raise ScheduleError(f"{path}: BS {key}: {why}")
    return schedule


def start_steps(schedule: dict[str, Any]) -> int:
    """The step count the server starts from: SGLang's own choice (the middle of every batch size's
    candidates), moved to the next one that speculates when that is 0; ScheduleError when none does."""
    steps = sorted({s for k, e in schedule.items() if k.isdigit() for s in e["candidate_steps"]})
    speculating = [s for s in steps[len(steps) // 2 :] if s > 0] or [s for s in steps if s > 0]
    if not speculating:
        raise ScheduleError("candidate_steps are 0 at every batch size: that schedule never speculates")
    return speculating[0]


def problems(s: Settings, algorithm: str | None, topks: Sequence[int]) -> list[str]:
    """Why a host cannot run the adaptive arm, in SGLang's words where SGLang refuses it (`algorithm`:
    the sweep's, else the host's sglang_server_speculative_algorithm)."""
    algorithm = algorithm or str(s.get("speculative_algorithm") or "").upper() or None
    extra_args = [str(a) for a in s.get("extra_args") or []]
    refusals = []
    if algorithm not in ALGORITHMS:
        only = "/".join(ALGORITHMS)
        refusals.append(f"speculative_algorithm={algorithm} (only {only} are supported)")
    refusals += [f"speculative_eagle_topk={k} (only topk=1 is supported)" for k in topks if k != 1][:1]
    refusals += [why for flag, why in UNSUPPORTED_FLAGS.items() if flag in extra_args]
    sglang = f"SGLang {VERSION_CHECKED}"
    return [f"adaptive_config: {sglang} refuses adaptive speculation: {r}" for r in refusals]


def host_schedule(s: Settings, given: str, host: str) -> tuple[str | None, dict[str, Any]]:
    """The adaptive schedule this host's SGLang would follow (the file, or its release's built-in
    one), and why it cannot: a release without a per-batch-size schedule, or keys it never reads."""
    version = str(s.get("version") or sglang_releases.LAST_RELEASE)
    try:
        row = sglang_releases.release(version)
        schedule = (
            {str(k): {"candidate_steps": list(v)} for k, v in row.builtin_schedule.items()}
            if given == BUILTIN_SCHEDULE
            else load(given)
        )
    except (sglang_releases.ReleaseError, ScheduleError) as exc:
        return f"adaptive_config: {host}: {exc}", {}
    if not row.adaptive_keys:
        none = f"adaptive_config: SGLang {version} on {host} has no per-batch-size schedule"
        return f"{none} ({row.source})", {}
    ignored = sglang_releases.ignored_keys(version, schedule)
    if ignored:
        read = ", ".join(sorted(row.adaptive_keys | row.adaptive_top_keys))
        return (
            f"adaptive_config: SGLang {version} on {host} would ignore {', '.join(ignored)} of {given} "
            f"(it reads batch-size keys with {read}: {row.source})"
        ), {}
    return None, schedule


def notes(given: str, schedule: dict[str, Any], levels: Sequence[int]) -> list[str]:
    """From which batch size the schedule only has 0 steps (no speculation), and the levels it hits."""
    stops = sglang_releases.stops_speculating_at(
        {int(k): tuple(e["candidate_steps"]) for k, e in schedule.items() if k.isdigit()}
    )
    if stops is None:
        return []
    whose = (
        "SGLang's built-in adaptive schedule (speculative/adaptive_spec_params.py DEFAULT_ADAPTIVE_CONFIG)"
        if given == BUILTIN_SCHEDULE
        else f"the adaptive schedule {given}"
    )
    hit = [n for n in levels if n >= stops]
    at = f": at concurrency {', '.join(map(str, hit))} the adaptive arm runs the baseline" if hit else ""
    return [f"adaptive: {whose} stops speculating at batch >= {stops}{at}"]
