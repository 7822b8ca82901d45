"""The adaptive arm (analysis.engines.sglang_adaptive): SGLang's schedule file read by SGLang's own rules,
the config `adaptive` beside the static ones, its argv, and what SGLang would refuse."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sglang_wheel import sglang_adaptive
from test_sglang_argv import assert_sglang_accepts
from test_sweep_plan import IDENTITY, SGLANG, llama

from analysis.engines import sglang_adaptive as adaptive
from analysis.sweep import plan, request

SCHEDULE = {"1": {"candidate_steps": [1, 3, 5]}, "8": {"candidate_steps": [0, 1]}}


@pytest.fixture(scope="module")
def sglang() -> dict[str, Any]:
    return sglang_adaptive()


def write(tmp_path: Path, schedule: Any) -> Path:
    path = tmp_path / "adaptive.json"
    path.write_text(json.dumps(schedule))
    return path


def sglang_host(name: str = "g1", **settings: Any) -> plan.HostInput:
    return plan.HostInput(name, "sglang", {**SGLANG, **settings}, run_dir="/var/tmp/specsweep")


def build(tmp_path: Path, hosts: list[plan.HostInput], **given: Any) -> dict[str, Any]:
    return plan.build(request.read(given), {h.name: h for h in hosts}, IDENTITY, tmp_path)


@pytest.mark.parametrize(
    "schedule",
    [
        SCHEDULE,
        {**SCHEDULE, "note": "not a batch size"},  # loaded, but the plan refuses what SGLang ignores
        {"1": {"candidate_steps": [2]}},
        {"notes": {}},  # no batch-size key
        {"1": {"candidate_steps": []}},
        {"1": {"candidate_steps": [1, -1]}},
        {"1": {"candidate_steps": [1.5]}},
        {"1": {"candidate_steps": "1,3"}},
    ],
)
def test_a_schedule_is_accepted_exactly_when_sglangs_own_loader_accepts_it(
    tmp_path: Path, sglang: dict[str, Any], schedule: Any
) -> None:
    path = write(tmp_path, schedule)
    try:
        sglang["_load_adaptive_config"](str(path))
        theirs = None
    except ValueError as exc:
        theirs = str(exc)
    try:
        adaptive.load(path)
        ours = None
    except adaptive.ScheduleError as exc:
        ours = str(exc)
    assert (ours is None) == (theirs is None), (ours, theirs)


@pytest.mark.parametrize(
    ("steps", "start"),
    [([1, 3, 5], 3), ([0, 1], 1), ([0, 1, 3, 5, 7], 3), ([0, 0, 2], 2), ([4], 4)],
)
def test_the_start_is_sglangs_middle_candidate_and_one_that_speculates(steps: list[int], start: int) -> None:
    assert adaptive.start_steps({"1": {"candidate_steps": steps}}) == start


def test_a_schedule_that_never_speculates_is_refused() -> None:
    with pytest.raises(adaptive.ScheduleError, match="never speculates"):
        adaptive.start_steps({"1": {"candidate_steps": [0]}, "8": {"candidate_steps": [0]}})


def test_the_adaptive_config_is_measured_beside_the_static_ones_and_sglang_parses_its_argv(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, SCHEDULE)
    built = build(tmp_path, [sglang_host()], steps="1,2", adaptive_config=str(path))
    assert built["errors"] == []
    host = built["hosts"]["g1"]
    entries = {e["config"]["id"]: e for e in host["entries"]}
    assert list(entries) == ["baseline", "s1", "s2", "adaptive"]
    config = entries["adaptive"]["config"]
    assert (config["adaptive"], config["steps"], config["topk"], config["draft_tokens"]) == (True, 3, 1, 4)
    argv = entries["adaptive"]["argv"]
    dest = "/var/tmp/specsweep/sw.adaptive.json"
    assert argv[argv.index("--speculative-adaptive") :][:3] == [
        "--speculative-adaptive", "--speculative-adaptive-config", dest,
    ]  # fmt: skip
    assert argv[argv.index("--speculative-num-steps") + 1] == "3"
    assert_sglang_accepts(argv)
    assert host["adaptive_config"] == {"src": str(path), "dest": dest}
    assert "--speculative-adaptive" not in entries["s2"]["argv"]


@pytest.mark.parametrize(
    ("given", "settings", "refusal"),
    [
        ({"algorithm": "NGRAM"}, {}, "speculative_algorithm=NGRAM (only EAGLE/EAGLE3 are supported)"),
        ({}, {"speculative_algorithm": "nextn"}, "speculative_algorithm=NEXTN (only EAGLE/EAGLE3"),
        ({"topk": "4", "draft_tokens": 8}, {}, "speculative_eagle_topk=4 (only topk=1 is supported)"),
        ({}, {"extra_args": ["--enable-dp-attention", "--dp-size", "2"]}, "attention DP is not supported"),
        (
            {},
            {"extra_args": ["--enable-two-batch-overlap"]},
            "enable_two_batch_overlap=True is not supported",
        ),
    ],
)
def test_what_sglang_would_refuse_is_refused_at_plan_time_with_sglangs_reason(
    tmp_path: Path, given: dict[str, Any], settings: dict[str, Any], refusal: str
) -> None:
    path = write(tmp_path, SCHEDULE)
    built = build(tmp_path, [sglang_host(**settings)], steps="2", adaptive_config=str(path), **given)
    prefix = "adaptive_config: SGLang 0.5.23 refuses adaptive speculation: "
    assert any(e.startswith(prefix + refusal) for e in built["errors"]), built["errors"]


def test_the_cpu_engine_has_no_adaptive_arm(tmp_path: Path) -> None:
    path = write(tmp_path, SCHEDULE)
    built = build(tmp_path, [llama()], steps="2", adaptive_config=str(path))
    assert built["errors"] == [
        "adaptive_config: llama_cpp has no adaptive speculation (SGLang's --speculative-adaptive or "
        "vLLM's Dynamic SD, num_speculative_tokens_per_batch_size); sweep it on SGLang or vLLM hosts"
    ]


def test_a_missing_or_malformed_schedule_is_refused_naming_the_setting(tmp_path: Path) -> None:
    missing = build(tmp_path, [sglang_host()], steps="2", adaptive_config=str(tmp_path / "absent.json"))
    assert missing["errors"][0].startswith("adaptive_config: ") and "cannot read" in missing["errors"][0]
    bad = build(tmp_path, [sglang_host()], steps="2", adaptive_config=str(write(tmp_path, {"x": 1})))
    assert "integer-string batch-size key" in bad["errors"][0]


def test_a_step_search_leaves_the_adaptive_config_to_the_grid(tmp_path: Path) -> None:
    path = write(tmp_path, SCHEDULE)
    built = build(tmp_path, [sglang_host()], search="steps", steps_range="1..4", adaptive_config=str(path))
    searched = {e["config"]["id"]: e["searched"] for e in built["hosts"]["g1"]["entries"]}
    assert searched == {"baseline": False, "s1": True, "s2": True, "s3": True, "s4": True, "adaptive": False}
