"""What may follow `-e` (analysis.sweep.request): unknown keys refused with a hint, every setting's
default, a calling playbook's defaults (specsweep_request), and the parsers not covered by test_grid."""

from __future__ import annotations

from typing import Any

import pytest
from ansible.parsing.splitter import parse_kv
from plugin_loader import load_plugin

from analysis.sweep import request

# What `-e` gives the plan when nothing is typed.
DEFAULTS = {
    "steps": [1], "topk": [], "draft_tokens": [], "overlap_schedule": [], "algorithm": "", "baseline": True,
    "env_profiles": [],
    "host_configs": {},
    "adaptive_config": "",
    "concurrency": [1], "repeats": 3, "warmup": 1, "max_tokens": 96,
    "launches": 1, "order": "random", "order_seed": None, "baseline_every": None,
    "race": False,  # decided: one launch -> nothing to race
    "finalists": True,  # decided: one launch -> the finalists are launched again
    "workloads": [], "workload_file": "", "workload_records": 0, "output_len": "fixed", "mix": {},
    "bench_requests": None, "bench_duration_s": None, "bench_ci_pct": None, "bench_min_requests": 8,
    "bench_level_budget_s": None, "request_rate": None, "seed": 42, "prefetch": True,
    "sla_ttft_p99_ms": None, "sla_itl_p99_ms": None, "objective": "throughput",
    "mode": "replicate", "search": "", "steps_range": [], "max_configs": 64, "lease_s": 600,
    "plan_only": False, "sweep_id": "", "resume": "", "target": "sweep", "results_dir": "",
}  # fmt: skip


# --------------------------------------------------------------------------------------
# unknown_keys
# --------------------------------------------------------------------------------------


def test_a_typo_is_refused_with_the_setting_it_resembles() -> None:
    assert request.unknown_keys({"stepz": 2}, ()) == ["stepz: not a sweep setting (did you mean steps?)"]
    assert request.unknown_keys({"concurency": 4, "repeat": 2}, ()) == [
        "concurency: not a sweep setting (did you mean concurrency?)",
        "repeat: not a sweep setting (did you mean repeats?)",
    ]


def test_a_key_like_nothing_known_is_refused_without_a_hint() -> None:
    assert request.unknown_keys({"zzzz": 1}, ()) == ["zzzz: not a sweep setting"]


def test_a_stray_word_in_key_value_form_is_refused() -> None:
    # `-e 'sweep_id=a b'`: Ansible keeps "a" as the sweep id and "b" as _raw_params.
    extra = parse_kv("sweep_id=a b")
    assert extra == {"sweep_id": "a", "_raw_params": "b"}
    problems = request.unknown_keys(extra, ())
    assert len(problems) == 1, problems
    assert problems[0].startswith("-e: 'b' is not key=value"), problems
    assert """-e '{"key": "a b"}'""" in problems[0], problems


def test_settings_host_variables_ansible_and_role_variables_are_accepted() -> None:
    extra = {
        **dict.fromkeys(request.BY_NAME, "x"),
        **dict.fromkeys(request.SUITE_VARIABLES, "x"),
        "ansible_user": "ops",
        "ansible_python_interpreter": "/usr/bin/python3",
        "llama_server_port": 8081,
    }
    assert request.unknown_keys(extra, {"llama_server_port"}) == []
    # A role variable counts only when a role documents it; the hint names the close one.
    assert request.unknown_keys({"llama_server_prot": 1}, {"llama_server_port"}) == [
        "llama_server_prot: not a sweep setting (did you mean llama_server_port?)"
    ]


def test_the_roles_own_variables_are_what_the_plan_accepts() -> None:
    """The plan action passes every variable a role documents (defaults and argument specs)."""
    known = load_plugin("plugins/action/specsweep_plan.py").role_variables()
    assert {"llama_server_port", "sglang_server_tp_size", "benchmark_client"} <= known
    assert request.unknown_keys({"sglang_server_tp_size": 8, "benchmark_client": "sglang"}, known) == []
    assert request.unknown_keys({"sglang_server_tp_sise": 8}, known) == [
        "sglang_server_tp_sise: not a sweep setting (did you mean sglang_server_tp_size?)"
    ]


# --------------------------------------------------------------------------------------
# read
# --------------------------------------------------------------------------------------


def test_nothing_given_reads_every_setting_at_its_default() -> None:
    req = request.read({})
    assert (req.values, req.errors) == (DEFAULTS, [])
    assert [s.name for s in request.SETTINGS] == list(DEFAULTS)
    assert all(s.help for s in request.SETTINGS)


def test_a_calling_playbooks_defaults_apply_and_minus_e_wins() -> None:
    nightly = {"steps": "1,2,4", "repeats": 5, "sweep_id": "nightly"}
    req = request.read({}, nightly)
    assert (req["steps"], req["repeats"], req["sweep_id"], req["warmup"]) == ([1, 2, 4], 5, "nightly", 1)
    req = request.read({"steps": "3", "sweep_id": "mine"}, nightly)
    assert (req["steps"], req["repeats"], req["sweep_id"], req.errors) == ([3], 5, "mine", [])


def test_a_bad_default_from_a_calling_playbook_is_refused_by_name() -> None:
    req = request.read({}, {"stepz": 2, "repeats": "many"})
    assert req.errors == [
        "specsweep_request: 'stepz' is not a sweep setting",
        "repeats: 'many' is not a whole number (got 'many')",
    ]


def test_a_resume_keeps_the_sweeps_settings_it_is_not_given_again() -> None:
    first = {"steps": "1,2", "workloads": "chat,code", "mix": "chat=0.7,code=0.3", "repeats": 1,
             "concurrency": "1,4", "order_seed": 7, "target": "gpu", "sweep_id": "R", "plan_only": True,
             "host_configs": {"h": "s3"}, "bench_requests": 12, "sla_ttft_p99_ms": 250,
             "race": True}  # fmt: skip
    recorded = request.read(first).values  # as sweep.json records them
    given = {"resume": "R", "repeats": 2}
    req = request.read(given, request.resumed(recorded, given))
    assert req.errors == []
    # Before, a mix not given again was recorded as {} and recommend fell back to equal shares.
    assert req["mix"] == pytest.approx({"chat": 0.7, "code": 0.3})
    kept = ("steps", "workloads", "concurrency", "order_seed", "order")
    assert {k: req[k] for k in kept} == {k: recorded[k] for k in kept}
    assert req["repeats"] == 2  # what -e says now wins
    # The run's own: the hosts this play targets, and how it found the sweep.
    assert (req["target"], req["sweep_id"], req["resume"], req["plan_only"]) == ("sweep", "", "R", False)
    # What read() always puts back: the whole request round-trips through its own record.
    assert request.read({}, request.resumed(recorded, {})).values == {
        **recorded,
        **{k: DEFAULTS[k] for k in request.RUN_ONLY},
    }


def test_a_resume_derives_again_what_follows_from_a_setting_it_is_given() -> None:
    recorded = request.read({"launches": 1, "search": "steps", "steps_range": "1..4"}).values
    assert (recorded["finalists"], recorded["steps"]) == (True, [1, 2, 3, 4])
    given = {"launches": 3, "steps": "2,3"}
    req = request.read(given, request.resumed(recorded, given))
    # Three launches: no finalists' launch unless asked; the steps given are the search's candidates.
    assert (req["finalists"], req["steps"], req["search"], req.errors) == (False, [2, 3], "steps", [])
    # A setting an older sweep.json holds that is no longer one is not read as a typo of the request.
    assert request.read({}, request.resumed({**recorded, "gone": 1}, {})).errors == []


def test_a_search_takes_its_candidates_from_steps_range() -> None:
    req = request.read({"search": "steps", "steps_range": "1..5"})
    assert (req["steps"], req["steps_range"], req.errors) == ([1, 2, 3, 4, 5], [1, 2, 3, 4, 5], [])
    # steps works too, and steps_range without a search changes nothing.
    assert request.read({"search": "steps", "steps": "2..4"})["steps"] == [2, 3, 4]
    assert request.read({"steps_range": "1..5"})["steps"] == [1]


# --------------------------------------------------------------------------------------
# The other parsers
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [("a,b", ["a", "b"]), ("[a, 'b']", ["a", "b"]), (["x", "y", "x"], ["x", "y"]), ("", []), (None, [])],
)
def test_names_read_lists_in_order_each_once(value: Any, expected: list[str]) -> None:
    assert request.names("env_profiles", value) == expected


@pytest.mark.parametrize(("value", "why"), [("a b", "'a b' is not a name"), (5, "expected a list of names")])
def test_names_refuse_by_name(value: Any, why: str) -> None:
    with pytest.raises(request.RequestError, match=rf"^env_profiles: {why}"):
        request.names("env_profiles", value)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"sla_ttft_p99_ms": "250"}, 250.0),
        ({"sla_ttft_p99_ms": 12.5}, 12.5),
        ({"sla_ttft_p99_ms": ""}, None),
    ],
)
def test_an_slo_is_a_positive_number_or_unset(given: dict[str, Any], expected: float | None) -> None:
    assert request.read(given)["sla_ttft_p99_ms"] == expected


@pytest.mark.parametrize(
    ("name", "value", "error"),
    [
        ("sla_itl_p99_ms", 0, "sla_itl_p99_ms: expected a number > 0, got 0"),
        ("sla_itl_p99_ms", "fast", "sla_itl_p99_ms: expected a number > 0, got 'fast'"),
        ("sla_itl_p99_ms", True, "sla_itl_p99_ms: expected a number > 0, got True"),
        ("sla_itl_p99_ms", "nan", "sla_itl_p99_ms: expected a number > 0, got 'nan'"),
        ("lease_s", 10, "lease_s: 10 is below the minimum of 30"),
        ("max_configs", "1,2", "max_configs: expected one whole number >= 1, got '1,2'"),
        ("target", "sweep\nall", "target: must not contain a newline or NUL"),
        ("resume", "../x", "resume: '../x' may use letters, digits, '.', '_' and '-' only"),
        ("search", "grid", "search: 'grid' is not one of: '', 'steps'"),
        ("bench_requests", "0", "bench_requests: 0 is below the minimum of 1"),
        ("bench_requests", "8,16", "bench_requests: expected one whole number >= 1, got '8,16'"),
        ("bench_duration_s", "-5", "bench_duration_s: expected a number > 0, got '-5'"),
        ("request_rate", "fast", "request_rate: expected a number > 0, got 'fast'"),
        ("seed", "-1", "seed: -1 is below the minimum of 0"),
    ],
)
def test_each_setting_is_refused_by_name(name: str, value: Any, error: str) -> None:
    req = request.read({name: value})
    assert req.errors == [error]
    assert name not in req.values


def test_an_empty_choice_reads_as_its_first_word() -> None:
    assert (request.read({"mode": ""})["mode"], request.read({"mode": None})["mode"]) == ("replicate",) * 2


def test_the_sweeps_slos_and_objective_become_the_analysis_options_and_an_unset_one_none() -> None:
    one = request.ranking_options({"sla_ttft_p99_ms": 200.0, "sla_itl_p99_ms": None})
    assert one == ["--sla-ttft-p99-ms", "200.0"]
    given = {"sla_ttft_p99_ms": 200.0, "sla_itl_p99_ms": 25, "objective": "goodput"}
    assert request.ranking_options(given) == [
        "--sla-ttft-p99-ms", "200.0", "--sla-itl-p99-ms", "25", "--objective", "goodput",
    ]  # fmt: skip
    assert request.ranking_options({}) == []


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ({"objective": "latency"}, "objective: 'latency' is not one of: 'throughput', 'per_user', 'goodput'"),
        ({"objective": "goodput"}, "objective: goodput counts requests within the SLOs; set sla_ttft_p99_ms"),
        (
            {"objective": "goodput", "search": "steps"},
            "objective: goodput counts requests within the SLOs; set sla_ttft_p99_ms or sla_itl_p99_ms",
        ),
    ],
)
def test_an_objective_that_cannot_rank_is_refused_naming_the_choices(given: dict, error: str) -> None:
    errors = request.read(given).errors
    assert len(errors) == 1 and errors[0].startswith(error), errors


def test_the_objective_defaults_to_throughput_and_goodput_takes_the_slos() -> None:
    assert request.read({}).values["objective"] == "throughput"
    req = request.read({"objective": "goodput", "sla_itl_p99_ms": "50"})
    assert (req["objective"], req.errors) == ("goodput", [])
    # The step search judges goodput too, with the same SLOs.
    searched = request.read({"objective": "goodput", "sla_itl_p99_ms": "50", "search": "steps"})
    assert searched.errors == []


def test_the_load_settings_are_read_as_the_client_takes_them() -> None:
    req = request.read({"bench_requests": "64", "request_rate": "2.5", "seed": "7", "concurrency": "1,16"})
    assert (req["bench_requests"], req["request_rate"], req["seed"], req.errors) == (64, 2.5, 7, [])
    assert request.read({"bench_duration_s": 30})["bench_duration_s"] == 30.0
    # An open loop's level is what its rate gives: few requests are not refused there.
    assert request.read({"bench_requests": 6, "concurrency": 8, "request_rate": 1}).errors == []


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ({"bench_requests": 8, "bench_duration_s": 20},
         "bench_requests: give bench_requests or bench_duration_s, not both"),
        ({"bench_requests": 20, "concurrency": "1,4,16"},
         "bench_requests: 20 is too few for concurrency 16: the measured window leaves out 15 request(s) at "
         "each end (ramp and drain) and must hold at least 16, so at least 46 per level (default: 4 x c)"),
        # Requests equal to the concurrency: the window would hold none (the run used to fail then).
        ({"bench_requests": 4, "concurrency": "4"},
         "bench_requests: 4 is too few for concurrency 4: the measured window leaves out 3 request(s) at "
         "each end (ramp and drain) and must hold at least 4, so at least 10 per level (default: 4 x c)"),
    ],
)  # fmt: skip
def test_load_settings_that_cannot_go_together_are_refused_at_plan_time(
    given: dict[str, Any], error: str
) -> None:
    assert request.read(given).errors == [error]


def test_a_mix_is_read_as_shares_of_requests_from_text_or_a_mapping() -> None:
    req = request.read({"workloads": "chat,code", "mix": "chat=7,code=3"})
    assert (req["mix"], req.errors) == (pytest.approx({"chat": 0.7, "code": 0.3}), [])
    given = {"workloads": ["chat", "code"], "mix": {"chat": 1, "code": 1}}
    assert request.read(given)["mix"] == {"chat": 0.5, "code": 0.5}
    # The operator's own traffic is the workload `file`.
    assert (
        request.read({"workload_file": "/t.jsonl", "workloads": "chat", "mix": "file=1,chat=1"}).errors == []
    )


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ({"workloads": "chat,code", "mix": "chat=0.7,math=0.3"},
         "mix: math not among the workloads measured (chat, code)"),
        ({"mix": "chat=1"},
         "mix: chat not among the workloads measured (none: set workloads or workload_file)"),
        ({"workloads": "chat,code", "mix": "chat=1,code=0"},
         "mix: 'code=0' is not workload=share (e.g. chat=0.7,code=0.3, each share above 0)"),
        ({"workloads": "chat", "mix": {"chat": -1}},
         "mix: 'chat=-1' is not workload=share (e.g. chat=0.7,code=0.3, each share above 0)"),
        ({"workloads": "chat", "mix": "chat"},
         "mix: 'chat' is not workload=share (e.g. chat=0.7,code=0.3, each share above 0)"),
    ],
)  # fmt: skip
def test_a_mix_naming_an_unmeasured_workload_or_a_share_not_above_0_is_refused(
    given: dict[str, Any], error: str
) -> None:
    assert request.read(given).errors == [error]
