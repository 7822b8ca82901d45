"""The sweep request parser and grid builder (plugins/filter/specsweep_grid.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from plugin_loader import load_plugin

grid = load_plugin("plugins/filter/specsweep_grid.py")

# What roles/sweep_plan passes when the operator types nothing but steps.
SETTINGS = {
    "repeats": 3,
    "warmup": 1,
    "max_tokens": 256,
    "concurrency": 1,
    "plan_only": False,
    "sweep_id": "",
}


def plan(engines: tuple[str, ...] = ("sglang",), **request: Any) -> dict[str, Any]:
    """sweep_plan() of SETTINGS overridden by `request`."""
    return grid.sweep_plan({**SETTINGS, **request}, list(engines))


def ids(result: dict[str, Any]) -> list[str]:
    return [c["id"] for c in result["configs"]]


def only_error(result: dict[str, Any]) -> str:
    """The single error of a refused request (and proof that nothing would be swept)."""
    assert len(result["errors"]) == 1, result["errors"]
    assert result["configs"] == [], result["configs"]
    return result["errors"][0]


# --------------------------------------------------------------------------------------
# parse_int_list / parse_bool
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (2, [2]),
        ([1, 2], [1, 2]),
        ([4, "2", 2], [2, 4]),
        ("1,2,4", [1, 2, 4]),
        ("4, 1 ,2", [1, 2, 4]),
        ("[1,2,4]", [1, 2, 4]),
        ("1..10", list(range(1, 11))),
        ("[3..5]", [3, 4, 5]),
        (" 3 ", [3]),
        ("7..7", [7]),
        (None, []),
        ("", []),
        ([], []),
    ],
)
def test_parse_int_list_accepts_the_documented_forms(value: Any, expected: list[int]) -> None:
    assert grid.parse_int_list("steps", value) == expected


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("abc", "is not a whole number"),
        (0, "below the minimum of 1"),
        (-1, "below the minimum of 1"),
        ("1.5", "is not a whole number"),
        (1.5, "expected integers"),
        (True, "expected integers"),
        ([1, True], "is not a whole number"),
        ("1; touch /tmp/x", "is not a whole number"),
        ("$(id)", "is not a whole number"),
        ("1,,2", "is not a whole number"),
        ("5..2", "is empty (write low..high)"),
        ({"a": 1}, "expected integers"),
    ],
)
def test_parse_int_list_rejects_by_variable_name(value: Any, why: str) -> None:
    with pytest.raises(grid.RequestError) as caught:
        grid.parse_int_list("steps", value)
    message = str(caught.value)
    assert message.startswith("steps: "), message
    assert why in message, message


def test_parse_int_list_minimum_zero_allows_zero() -> None:
    assert grid.parse_int_list("warmup", "0", minimum=0) == [0]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), (False, False), ("yes", True), (" TRUE ", True), ("on", True), ("1", True), (1, True),
     ("no", False), ("False", False), ("off", False), ("0", False), (0, False)],
)  # fmt: skip
def test_parse_bool_reads_yaml_and_command_line_spellings(value: Any, expected: bool) -> None:
    assert grid.parse_bool("baseline", value) is expected


@pytest.mark.parametrize("value", ["maybe", "", None, 2, "y e s"])
def test_parse_bool_rejects_anything_else_by_name(value: Any) -> None:
    with pytest.raises(grid.RequestError, match=r"^baseline: expected true or false, got "):
        grid.parse_bool("baseline", value)


# --------------------------------------------------------------------------------------
# sweep_plan: grid points
# --------------------------------------------------------------------------------------


def test_baseline_and_steps_make_one_config_each() -> None:
    result = plan(steps="1,2")
    assert (ids(result), result["warnings"], result["errors"]) == (["baseline", "s1", "s2"], [], [])
    assert result["configs"][0] == {"id": "baseline", "speculative": False, "algorithm": None, "steps": None,
                                    "topk": None, "draft_tokens": None, "env_profile": "default"}  # fmt: skip
    assert result["configs"][2] == {"id": "s2", "speculative": True, "algorithm": None, "steps": 2,
                                    "topk": None, "draft_tokens": None, "env_profile": "default"}  # fmt: skip


def test_baseline_false_leaves_only_speculative_configs() -> None:
    assert ids(plan(steps=2, baseline="false")) == ["s2"]


def test_baseline_alone_is_a_valid_sweep() -> None:
    assert ids(plan()) == ["baseline"]


def test_nothing_at_all_is_refused() -> None:
    assert only_error(plan(baseline=False)).startswith("steps/topk/draft_tokens: nothing valid to sweep")


def test_algorithm_is_carried_by_speculative_configs_only() -> None:
    configs = plan(steps=3, algorithm="EAGLE3")["configs"]
    assert [(c["id"], c["algorithm"]) for c in configs] == [("baseline", None), ("s3", "EAGLE3")]


def test_topk_without_steps_is_refused() -> None:
    error = only_error(plan(topk=2, draft_tokens=3))
    assert error.startswith("topk: "), error
    assert "steps" in error, error


def test_draft_tokens_without_topk_is_refused() -> None:
    error = only_error(plan(steps=2, draft_tokens=3))
    assert error.startswith("draft_tokens: "), error
    assert "topk" in error, error


@pytest.mark.parametrize(
    ("engines", "algorithm", "refused_by"),
    [
        (("sglang",), "ngram-mod", "sglang (one of: EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM)"),
        (("llama_cpp",), "EAGLE3", "llama_cpp (one of: ngram-mod)"),
        (("sglang", "llama_cpp"), "EAGLE3", "llama_cpp (one of: ngram-mod)"),
        (("sglang",), "eagle3", "sglang (one of: EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM)"),
    ],
)
def test_algorithm_unknown_to_a_targeted_engine_is_refused(
    engines: tuple[str, ...], algorithm: str, refused_by: str
) -> None:
    error = only_error(plan(engines, steps=2, algorithm=algorithm))
    assert error == f"algorithm: {algorithm!r} is not known to {refused_by}"


@pytest.mark.parametrize(("engines", "algorithm"), [(("sglang",), "NGRAM"), (("llama_cpp",), "ngram-mod")])
def test_algorithm_known_to_every_targeted_engine_is_accepted(
    engines: tuple[str, ...], algorithm: str
) -> None:
    assert ids(plan(engines, steps=2, algorithm=algorithm)) == ["baseline", "s2"]


def test_topk_with_a_llama_cpp_host_is_refused() -> None:
    error = only_error(plan(("sglang", "llama_cpp"), steps=2, topk=1))
    assert error.startswith("topk: "), error
    assert "llama_cpp" in error, error


def test_a_single_pointless_cell_is_an_error_not_an_empty_sweep() -> None:
    error = only_error(plan(steps=2, topk=2, draft_tokens=9))
    assert error.startswith("draft_tokens: "), error
    assert "9 > steps*topk+1 = 5" in error, error


def test_a_grid_keeps_its_valid_cells_and_warns_about_the_rest() -> None:
    result = plan(steps="1,2", topk="1,2", draft_tokens="3,5")
    assert result["errors"] == []
    assert ids(result) == ["baseline", "s1-k2-d3", "s2-k1-d3", "s2-k2-d3", "s2-k2-d5"]
    assert [w.split(":", 1)[0] for w in result["warnings"]] == [
        "skipped steps=1 topk=1 draft_tokens=3",
        "skipped steps=1 topk=1 draft_tokens=5",
        "skipped steps=1 topk=2 draft_tokens=5",
        "skipped steps=2 topk=1 draft_tokens=5",
    ]
    assert "5 > steps*topk+1 = 3" in result["warnings"][2], result["warnings"]


def test_topk_1_drafts_steps_plus_one_tokens() -> None:
    result = plan(steps=2, topk=1)
    assert (ids(result), result["errors"]) == (["baseline", "s2-k1-d3"], [])
    assert result["configs"][1]["draft_tokens"] == 3


def test_topk_1_with_another_draft_count_is_refused() -> None:
    error = only_error(plan(steps=2, topk=1, draft_tokens=2))
    assert error.startswith("draft_tokens: "), error
    assert "steps+1 = 3" in error, error


def test_topk_above_1_needs_draft_tokens() -> None:
    assert only_error(plan(steps=2, topk=2)) == "draft_tokens: required when topk is 2 (steps 2)"


def test_env_profiles_repeat_the_grid_with_a_suffix() -> None:
    assert ids(plan(steps=2, env_profiles=["default", "nccl_ll"])) == [
        "baseline", "s2", "baseline+nccl_ll", "s2+nccl_ll",
    ]  # fmt: skip


def test_unknown_engine_is_refused_by_its_variable() -> None:
    result = plan(("sglang", "vllm"), steps=2)
    assert result["errors"] == ["specsweep_engine: vllm is not one of: sglang, llama_cpp"]
    assert result["configs"] == []


# --------------------------------------------------------------------------------------
# sweep_plan: settings and sweep_id
# --------------------------------------------------------------------------------------


def test_settings_are_parsed_from_command_line_strings() -> None:
    result = plan(repeats="2", warmup="0", max_tokens="[64]", concurrency="4,1,8", plan_only="yes",
                  sweep_id="nightly-2026.01_05", mode="shard")  # fmt: skip
    assert result["errors"] == []
    assert result["settings"] == {"repeats": 2, "warmup": 0, "max_tokens": 64, "concurrency": [1, 4, 8],
                                  "plan_only": True, "sweep_id": "nightly-2026.01_05",
                                  "mode": "shard", "search": ""}  # fmt: skip


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("repeats", "x", "'x' is not a whole number"),
        ("repeats", 0, "0 is below the minimum of 1"),
        ("repeats", "3,5", "expected one whole number"),
        ("repeats", None, "expected one whole number"),
        ("warmup", -1, "-1 is below the minimum of 0"),
        ("max_tokens", "1..4", "expected one whole number"),
        ("max_tokens", 12.5, "expected integers"),
        ("concurrency", "1..0", "is empty"),
        ("concurrency", "", "expected one or more whole numbers"),
        ("concurrency", "2; reboot", "is not a whole number"),
        ("plan_only", "maybe", "expected true or false, got 'maybe'"),
        ("mode", "sharded", "'sharded' is not one of: replicate, shard"),
    ],
)
def test_a_bad_setting_is_refused_by_name_with_the_reason(name: str, value: Any, why: str) -> None:
    result = plan(steps=2, **{name: value})
    assert len(result["errors"]) == 1, result["errors"]
    assert result["errors"][0].startswith(f"{name}: "), result["errors"]
    assert why in result["errors"][0], result["errors"]
    assert name not in result["settings"]


def test_every_problem_is_reported_at_once() -> None:
    result = plan(("sglang",), steps="abc", repeats=0, plan_only="maybe", sweep_id="a b")
    assert [e.split(":", 1)[0] for e in result["errors"]] == ["repeats", "plan_only", "sweep_id", "steps"]


@pytest.mark.parametrize(
    "sweep_id", ["a b", "../etc", ".hidden", "-x", "a/b", "a" * 65, "ok\n", "$(id)", "é"]
)
def test_sweep_id_must_be_a_plain_folder_name(sweep_id: str) -> None:
    result = plan(steps=2, sweep_id=sweep_id)
    assert result["errors"] == [f"sweep_id: {sweep_id!r} may use letters, digits, '.', '_' and '-' only"]


@pytest.mark.parametrize("sweep_id", ["a", "A" * 64, "20261130T052259Z", "v1.2_rc-3"])
def test_sweep_id_accepts_plain_names(sweep_id: str) -> None:
    result = plan(steps=2, sweep_id=sweep_id)
    assert (result["errors"], result["settings"]["sweep_id"]) == ([], sweep_id)


def test_plan_entries_pair_configs_with_argv_and_stringified_env() -> None:
    configs = plan(steps=2)["configs"]
    entries = grid.plan_entries(configs, [("srv", "-a"), ["srv", "-b"]], {"NCCL_X": 1})
    assert entries == [
        {"config": configs[0], "argv": ["srv", "-a"], "env": {"NCCL_X": "1"}},
        {"config": configs[1], "argv": ["srv", "-b"], "env": {"NCCL_X": "1"}},
    ]
    with pytest.raises(ValueError):
        grid.plan_entries(configs, [["srv"]], {})


def test_env_profiles_multiply_the_grid_and_must_exist_on_every_host() -> None:
    result = grid.sweep_plan({**SETTINGS, "steps": "2", "env_profiles": "default,fast"}, ["llama_cpp"],
                             [["fast", "slow"], ["fast"]])  # fmt: skip
    assert [c["id"] for c in result["configs"]] == ["baseline", "s2", "baseline+fast", "s2+fast"]
    missing = grid.sweep_plan(
        {**SETTINGS, "steps": "2", "env_profiles": "slow"}, ["llama_cpp"], [["fast", "slow"], ["fast"]]
    )
    assert missing["errors"] == [
        "env_profiles: slow not defined in specsweep_env_profiles of every targeted host"
    ]
    bad = grid.sweep_plan({**SETTINGS, "steps": "2", "env_profiles": "a b"}, ["llama_cpp"], [["a b"]])
    assert bad["errors"][0].startswith("env_profiles: 'a b' is not a name")


def test_plan_entries_merge_the_profile_and_a_null_removes_a_variable() -> None:
    configs = [grid._config(2, None, None, None, "lean"), grid._config(2, None, None, None, "default")]
    entries = grid.plan_entries(configs, [["a"], ["b"]], {"NCCL_ALGO": "Ring", "KEEP": 1},
                                {"lean": {"NCCL_ALGO": None, "OMP": 2}})  # fmt: skip
    assert entries[0]["env"] == {"KEEP": "1", "OMP": "2"}
    assert entries[1]["env"] == {"NCCL_ALGO": "Ring", "KEEP": "1"}
    with pytest.raises(ValueError, match="newline"):
        grid.plan_entries(configs[:1], [["a"]], {"X": "a\nb"})


def test_measured_finds_only_ok_facts(tmp_path: Path) -> None:
    (tmp_path / "h1").mkdir()
    (tmp_path / "h1" / "s1.json").write_text('{"status": "ok"}')
    (tmp_path / "h1" / "s2.json").write_text('{"status": "failed"}')
    (tmp_path / "h1" / "s3.json").write_text('{"status": "ok"')  # truncated by a crash
    assert grid.measured(str(tmp_path), "s1", "h1") is True
    assert grid.measured(str(tmp_path), "s1", "h2") is False
    assert grid.measured(str(tmp_path), "s1") is True  # any host (shard mode)
    assert grid.measured(str(tmp_path), "s2") is False
    assert grid.measured(str(tmp_path), "s3") is False


def test_step_search_takes_a_range_of_steps_and_keeps_the_baseline() -> None:
    result = plan(("llama_cpp",), steps="1..4", search="steps")
    assert result["errors"] == []
    assert result["settings"]["search"] == "steps"
    assert ids(result) == ["baseline", "s1", "s2", "s3", "s4"]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"steps": "1,2"}, "steps_range: search=steps needs at least 3 step counts"),
        ({"steps": "1..4", "topk": "1,2", "draft_tokens": "3"}, "topk: search=steps varies steps only"),
        ({"steps": "1..4", "search": "topk"}, "search: 'topk' is not one of: , steps"),
    ],
)
def test_step_search_refuses_what_it_cannot_search(request_: dict[str, Any], message: str) -> None:
    errors = plan(**{"search": "steps", **request_})["errors"]
    assert any(e.startswith(message) for e in errors), errors


def test_unmeasured_names_each_lost_host_and_the_configs_it_left(tmp_path: Path) -> None:
    configs = plan(("llama_cpp",), steps="1,2")["configs"]
    for host, cid in [("a", "baseline"), ("a", "s1"), ("a", "s2"), ("b", "baseline")]:
        (tmp_path / host).mkdir(exist_ok=True)
        (tmp_path / host / f"{cid}.json").write_text("{}")
    states = {"a": "finished", "b": "lost mid-sweep"}
    lines = grid.unmeasured(str(tmp_path), ["a", "b", "c"], configs, {"mode": "replicate"}, states)
    assert lines == [
        "b: lost mid-sweep; not measured: s1, s2",
        "c: not reached; not measured: baseline, s1, s2",
    ]
    # Shard: hosts owe only their baselines; a speculative config nobody measured is listed once.
    shard = grid.unmeasured(str(tmp_path), ["a", "b"], configs, {"mode": "shard"}, states)
    assert shard == []
    (tmp_path / "a" / "s2.json").unlink()
    shard = grid.unmeasured(str(tmp_path), ["a", "b"], configs, {"mode": "shard"}, states)
    assert shard == ["(shard): not measured by any host: s2"]
