"""The sweep request and its grid: analysis.sweep.request (the `-e` settings), analysis.sweep.config.grid
(the grid points), analysis.sweep.plan.build (the request checked against the targeted hosts) and
analysis.running.progress (what the facts on disk say was measured)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from analysis.engines.llama_cpp import argv as llama_cpp_argv
from analysis.running import progress
from analysis.sweep import config, plan, request

# A targeted host's engine role variables (short names, the roles' defaults resolved).
SETTINGS: dict[str, dict[str, Any]] = {
    "llama_cpp": {
        "command": ["/opt/specsweep/llama.cpp-venv/bin/python", "/opt/specsweep/specsweep_llama_server.py"],
        "model_path": "/opt/specsweep/models/gemma-3-270m-q4_k_m.gguf",
        "host": "127.0.0.1",
        "port": 8080,
        "threads": 1,
        "ctx_size": 2048,
        "parallel": 1,
        "metrics": True,
        "ngram_n_match": 4,
        "ngram_n_min": 1,
        "env": {},
        "extra_args": [],
        "health_timeout_s": 120,
    },
    "sglang": {
        "python": "/opt/sglang/bin/python",
        "model_path": "/models/Kimi-K2.5-int4",
        "draft_model_path": "/models/Kimi-K2.5-eagle3",
        "speculative_algorithm": "EAGLE3",
        "tp_size": 8,
        "host": "127.0.0.1",
        "port": 30000,
        "enable_metrics": True,
        "env": {},
        "extra_args": [],
        "health_timeout_s": 1800,
    },
}
IDENTITY = plan.Identity(
    sweep_id="sw", sweep_dir="/results/sw", run_id="r1", git_rev=None, repo="/repo", started_at=0.0
)
NO_RESULTS = Path("/nonexistent/specsweep-results")


def host(name: str, engine: str = "sglang", **kw: Any) -> plan.HostInput:
    """A targeted host with its engine's usual settings."""
    return plan.HostInput(name=name, engine=engine, settings=SETTINGS.get(engine, {}), **kw)


def sweep(
    engines: tuple[str, ...] = ("sglang",), hosts: list[plan.HostInput] | None = None, **given: Any
) -> dict:
    """plan.build of `given` (as typed after -e) on one host per engine (or on `hosts`)."""
    targets = hosts or [host(f"h{i}", e) for i, e in enumerate(engines)]
    return plan.build(request.read(given), {h.name: h for h in targets}, IDENTITY, NO_RESULTS)


def ids(built: dict[str, Any]) -> list[str]:
    assert built["errors"] == [], built["errors"]
    return [c["id"] for c in built["sweep"]["configs"]]


def only_error(built: dict[str, Any]) -> str:
    """The single error of a refused request (and proof that nothing would be swept)."""
    assert len(built["errors"]) == 1, built["errors"]
    assert "sweep" not in built and "hosts" not in built, built
    return built["errors"][0]


# --------------------------------------------------------------------------------------
# request: int_list / boolean
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
    assert request.int_list("steps", value) == expected


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("abc", "is not a whole number"),
        (0, "below the minimum of 1"),
        (-1, "below the minimum of 1"),
        ("1.5", "is not a whole number"),
        (1.5, "expected whole numbers"),
        (True, "expected whole numbers"),
        ([1, True], "is not a whole number"),
        ("1; touch /tmp/x", "is not a whole number"),
        ("$(id)", "is not a whole number"),
        ("1,,2", "is not a whole number"),
        ("5..2", "is empty (write low..high)"),
        ({"a": 1}, "expected whole numbers"),
    ],
)
def test_parse_int_list_rejects_by_variable_name(value: Any, why: str) -> None:
    with pytest.raises(request.RequestError) as caught:
        request.int_list("steps", value)
    message = str(caught.value)
    assert message.startswith("steps: "), message
    assert why in message, message


def test_parse_int_list_minimum_zero_allows_zero() -> None:
    assert request.int_list("warmup", "0", minimum=0) == [0]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), (False, False), ("yes", True), (" TRUE ", True), ("on", True), ("1", True), (1, True),
     ("no", False), ("False", False), ("off", False), ("0", False), (0, False)],
)  # fmt: skip
def test_parse_bool_reads_yaml_and_command_line_spellings(value: Any, expected: bool) -> None:
    assert request.boolean("baseline", value) is expected


@pytest.mark.parametrize("value", ["maybe", "", None, 2, "y e s"])
def test_parse_bool_rejects_anything_else_by_name(value: Any) -> None:
    with pytest.raises(request.RequestError, match=r"^baseline: expected true or false, got "):
        request.boolean("baseline", value)


# --------------------------------------------------------------------------------------
# The grid points of a request
# --------------------------------------------------------------------------------------


def test_baseline_and_steps_make_one_config_each() -> None:
    built = sweep(steps="1,2")
    assert (ids(built), built["sweep"]["warnings"]) == (["baseline", "s1", "s2"], [])
    assert built["sweep"]["configs"][0] == {"id": "baseline", "speculative": False, "algorithm": None,
                                            "steps": None, "topk": None, "draft_tokens": None,
                                            "overlap_schedule": None, "adaptive": False,
                                            "env_profile": "default"}  # fmt: skip
    assert built["sweep"]["configs"][2] == {"id": "s2", "speculative": True, "algorithm": None, "steps": 2,
                                            "topk": None, "draft_tokens": None, "overlap_schedule": None,
                                            "adaptive": False, "env_profile": "default"}  # fmt: skip


def test_the_grid_function_makes_the_same_configs_as_the_plan() -> None:
    configs, warnings = config.grid({"steps": [1, 2]}, engines=("sglang",))
    assert (configs, warnings) == ([config.make(), config.make(1), config.make(2)], [])
    assert [msgspec.to_builtins(c) for c in configs] == sweep(steps="1,2")["sweep"]["configs"]


def test_baseline_false_leaves_only_speculative_configs() -> None:
    assert ids(sweep(steps=2, baseline="false")) == ["s2"]


def test_baseline_alone_is_a_valid_sweep() -> None:
    assert ids(sweep(steps="")) == ["baseline"]


def test_nothing_at_all_is_refused() -> None:
    error = only_error(sweep(steps="", baseline=False))
    assert error.startswith("steps/topk/draft_tokens: nothing valid to sweep"), error


def test_algorithm_is_carried_by_speculative_configs_only() -> None:
    configs = sweep(steps=3, algorithm="EAGLE3")["sweep"]["configs"]
    assert [(c["id"], c["algorithm"]) for c in configs] == [("baseline", None), ("s3", "EAGLE3")]


def test_topk_without_steps_is_refused() -> None:
    error = only_error(sweep(steps="", topk=2, draft_tokens=3))
    assert error.startswith("topk: "), error
    assert "steps" in error, error


def test_draft_tokens_without_topk_is_refused() -> None:
    error = only_error(sweep(steps=2, draft_tokens=3))
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
    error = only_error(sweep(engines, steps=2, algorithm=algorithm))
    assert error == f"algorithm: {algorithm!r} is not known to {refused_by}"


@pytest.mark.parametrize(("engines", "algorithm"), [(("sglang",), "NGRAM"), (("llama_cpp",), "ngram-mod")])
def test_algorithm_known_to_every_targeted_engine_is_accepted(
    engines: tuple[str, ...], algorithm: str
) -> None:
    assert ids(sweep(engines, steps=2, algorithm=algorithm)) == ["baseline", "s2"]


def test_topk_with_a_llama_cpp_host_is_refused() -> None:
    error = only_error(sweep(("sglang", "llama_cpp"), steps=2, topk=1))
    assert error.startswith("topk: "), error
    assert "llama_cpp" in error, error


def test_a_single_pointless_cell_is_an_error_not_an_empty_sweep() -> None:
    error = only_error(sweep(steps=2, topk=2, draft_tokens=9))
    assert error.startswith("draft_tokens: "), error
    assert "9 > steps*topk+1 = 5" in error, error


def test_a_grid_keeps_its_valid_cells_and_warns_about_the_rest() -> None:
    built = sweep(steps="1,2", topk="1,2", draft_tokens="3,5")
    assert ids(built) == ["baseline", "s1-k2-d3", "s2-k1-d3", "s2-k2-d3", "s2-k2-d5"]
    warnings = built["sweep"]["warnings"]
    assert [w.split(":", 1)[0] for w in warnings] == [
        "skipped steps=1 topk=1 draft_tokens=3",
        "skipped steps=1 topk=1 draft_tokens=5",
        "skipped steps=1 topk=2 draft_tokens=5",
        "skipped steps=2 topk=1 draft_tokens=5",
    ]
    assert "5 > steps*topk+1 = 3" in warnings[2], warnings


def test_topk_1_drafts_steps_plus_one_tokens() -> None:
    built = sweep(steps=2, topk=1)
    assert ids(built) == ["baseline", "s2-k1-d3"]
    assert built["sweep"]["configs"][1]["draft_tokens"] == 3


def test_topk_1_with_another_draft_count_is_refused() -> None:
    error = only_error(sweep(steps=2, topk=1, draft_tokens=2))
    assert error.startswith("draft_tokens: "), error
    assert "steps+1 = 3" in error, error


def test_topk_above_1_needs_draft_tokens() -> None:
    assert only_error(sweep(steps=2, topk=2)) == "draft_tokens: required when topk is 2 (steps 2)"


def test_env_profiles_repeat_the_grid_with_a_suffix() -> None:
    hosts = [host("h0", env_profiles={"nccl_ll": {"NCCL_PROTO": "LL"}})]
    assert ids(sweep(hosts=hosts, steps=2, env_profiles=["default", "nccl_ll"])) == [
        "baseline", "s2", "baseline+nccl_ll", "s2+nccl_ll",
    ]  # fmt: skip


def test_unknown_engine_is_refused_by_its_variable() -> None:
    built = sweep(("sglang", "tgi"), steps=2)
    assert built == {"errors": ["specsweep_engine: tgi is not one of: llama_cpp, sglang, vllm"]}


# --------------------------------------------------------------------------------------
# Settings and sweep_id
# --------------------------------------------------------------------------------------


def test_settings_are_parsed_from_command_line_strings() -> None:
    req = request.read({"repeats": "2", "warmup": "0", "max_tokens": "[64]", "concurrency": "4,1,8",
                        "plan_only": "yes", "sweep_id": "nightly-2026.01_05", "mode": "shard"})  # fmt: skip
    assert req.errors == []
    expected = {"repeats": 2, "warmup": 0, "max_tokens": 64, "concurrency": [1, 4, 8], "plan_only": True,
                "sweep_id": "nightly-2026.01_05", "mode": "shard", "search": ""}  # fmt: skip
    assert {k: req[k] for k in expected} == expected
    # The plan carries them as they were read.
    built = sweep(steps=2, repeats="2", concurrency="4,1,8", mode="shard")
    assert (built["sweep"]["settings"]["repeats"], built["sweep"]["settings"]["concurrency"]) == (
        2,
        [1, 4, 8],
    )


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("repeats", "x", "'x' is not a whole number"),
        ("repeats", 0, "0 is below the minimum of 1"),
        ("repeats", "3,5", "expected one whole number"),
        ("repeats", None, "expected one whole number"),
        ("warmup", -1, "-1 is below the minimum of 0"),
        ("max_tokens", "1..4", "expected one whole number"),
        ("max_tokens", 12.5, "expected whole numbers"),
        ("concurrency", "1..0", "is empty"),
        ("concurrency", "", "expected one or more whole numbers"),
        ("concurrency", "2; reboot", "is not a whole number"),
        ("plan_only", "maybe", "expected true or false, got 'maybe'"),
        ("mode", "sharded", "'sharded' is not one of: 'replicate', 'shard'"),
    ],
)
def test_a_bad_setting_is_refused_by_name_with_the_reason(name: str, value: Any, why: str) -> None:
    req = request.read({"steps": 2, name: value})
    assert len(req.errors) == 1, req.errors
    assert req.errors[0].startswith(f"{name}: "), req.errors
    assert why in req.errors[0], req.errors
    assert name not in req.values
    # The plan refuses it before building anything.
    assert sweep(steps=2, **{name: value}) == {"errors": req.errors}


def test_every_problem_is_reported_at_once() -> None:
    built = sweep(("sglang",), steps="abc", repeats=0, plan_only="maybe", sweep_id="a b")
    assert [e.split(":", 1)[0] for e in built["errors"]] == ["steps", "repeats", "plan_only", "sweep_id"]


@pytest.mark.parametrize(
    "sweep_id", ["a b", "../etc", ".hidden", "-x", "a/b", "a" * 65, "ok\n", "$(id)", "é"]
)
def test_sweep_id_must_be_a_plain_folder_name(sweep_id: str) -> None:
    assert request.read({"steps": 2, "sweep_id": sweep_id}).errors == [
        f"sweep_id: {sweep_id!r} may use letters, digits, '.', '_' and '-' only"
    ]


@pytest.mark.parametrize("sweep_id", ["a", "A" * 64, "20261130T052259Z", "v1.2_rc-3"])
def test_sweep_id_accepts_plain_names(sweep_id: str) -> None:
    req = request.read({"steps": 2, "sweep_id": sweep_id})
    assert (req.errors, req["sweep_id"]) == ([], sweep_id)


# --------------------------------------------------------------------------------------
# Each host's entries: config, argv and env together
# --------------------------------------------------------------------------------------


def test_plan_entries_pair_configs_with_argv_and_stringified_env() -> None:
    settings = {**SETTINGS["llama_cpp"], "env": {"NCCL_X": 1}}
    built = sweep(hosts=[plan.HostInput("h0", "llama_cpp", settings)], steps=2)
    configs = built["sweep"]["configs"]
    entries = built["hosts"]["h0"]["entries"]
    assert [e["config"] for e in entries] == configs
    assert [e["argv"] for e in entries] == [
        llama_cpp_argv(msgspec.convert(c, config.Config), settings, 1) for c in configs
    ]
    assert entries[0]["argv"] != entries[1]["argv"]
    assert [e["env"] for e in entries] == [{"LLAMA_ARG_THREADS": "1", "NCCL_X": "1"}] * 2


def test_env_profiles_multiply_the_grid_and_must_exist_on_every_host() -> None:
    hosts = [
        host("a", "llama_cpp", env_profiles={"fast": {}, "slow": {}}),
        host("b", "llama_cpp", env_profiles={"fast": {}}),
    ]
    assert ids(sweep(hosts=hosts, steps="2", env_profiles="default,fast")) == [
        "baseline", "s2", "baseline+fast", "s2+fast",
    ]  # fmt: skip
    missing = sweep(hosts=hosts, steps="2", env_profiles="slow")
    assert missing == {
        "errors": ["env_profiles: slow not defined in specsweep_env_profiles of every targeted host"]
    }
    bad = sweep(hosts=[host("a", "llama_cpp", env_profiles={"a b": {}})], steps="2", env_profiles="a b")
    assert bad["errors"][0].startswith("env_profiles: 'a b' is not a name"), bad


def test_plan_entries_merge_the_profile_and_a_null_removes_a_variable() -> None:
    settings = {**SETTINGS["sglang"], "env": {"NCCL_ALGO": "Ring", "KEEP": 1}}
    lean = plan.HostInput("h0", "sglang", settings, env_profiles={"lean": {"NCCL_ALGO": None, "OMP": 2}})
    built = sweep(hosts=[lean], steps=2, baseline=False, env_profiles="lean,default")
    envs = {e["config"]["id"]: e["env"] for e in built["hosts"]["h0"]["entries"]}
    assert envs == {"s2+lean": {"KEEP": "1", "OMP": "2"}, "s2": {"NCCL_ALGO": "Ring", "KEEP": "1"}}
    bad = plan.HostInput("h0", "sglang", {**SETTINGS["sglang"], "env": {"X": "a\nb"}})
    refused = sweep(hosts=[bad], steps=2)["hosts"]["h0"]
    assert refused["problems"] == ["X: value must not contain a newline or NUL"]


# --------------------------------------------------------------------------------------
# How many configs, and step searches
# --------------------------------------------------------------------------------------


def test_a_grid_above_max_configs_is_refused_naming_the_count_and_how_to_allow_it() -> None:
    error = only_error(sweep(steps="1..10", topk="1", max_configs=10))
    assert error == (
        "max_configs: the grid has 11 configs, above the limit of 10; narrow "
        "steps/topk/draft_tokens/env_profiles, or raise it with -e max_configs=11"
    )
    assert ids(sweep(steps="1..10", topk="1", max_configs=11))[-1] == "s10-k1-d11"


def test_step_search_takes_a_range_of_steps_and_keeps_the_baseline() -> None:
    built = sweep(("llama_cpp",), steps="1..4", search="steps")
    assert built["sweep"]["settings"]["search"] == "steps"
    assert ids(built) == ["baseline", "s1", "s2", "s3", "s4"]
    # Its candidates may come as steps_range too.
    assert ids(sweep(("llama_cpp",), steps_range="2..4", search="steps")) == ["baseline", "s2", "s3", "s4"]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"steps": "1,2"}, "steps_range: search=steps needs at least 3 step counts"),
        ({"steps": "1..4", "topk": "1,2", "draft_tokens": "3"}, "topk: search=steps varies steps only"),
        (
            {"steps": "1..4", "topk": "2", "draft_tokens": "3,4"},
            "draft_tokens: search=steps varies steps only",
        ),
        ({"steps": "1..4", "search": "topk"}, "search: 'topk' is not one of: '', 'steps'"),
    ],
)
def test_step_search_refuses_what_it_cannot_search(request_: dict[str, Any], message: str) -> None:
    errors = sweep(**{"search": "steps", **request_})["errors"]
    assert any(e.startswith(message) for e in errors), errors


def test_step_search_needs_three_step_counts_in_every_env_profile() -> None:
    hosts = [host("h0", env_profiles={"fast": {}})]
    built = sweep(hosts=hosts, steps="1..3", search="steps", env_profiles="default,fast")
    assert built["errors"] == []
    # One profile with too few candidates refuses the search.
    few = sweep(hosts=hosts, steps="1,2", search="steps", env_profiles="default,fast")
    assert [e.split(":")[0] for e in few["errors"]] == ["steps_range"]


# --------------------------------------------------------------------------------------
# Multi-node: a host that follows another
# --------------------------------------------------------------------------------------


def follower(name: str, leader: str, rank: int = 1) -> plan.HostInput:
    settings = {**SETTINGS["sglang"], "nnodes": 2, "node_rank": rank, "dist_init_addr": "10.0.0.1:25000"}
    return plan.HostInput(name, "sglang", settings, follows=leader)


def leader(name: str) -> plan.HostInput:
    settings = {**SETTINGS["sglang"], "nnodes": 2, "node_rank": 0, "dist_init_addr": "10.0.0.1:25000"}
    return plan.HostInput(name, "sglang", settings)


def test_a_follower_of_a_targeted_leader_runs_its_configs_in_a_plain_sweep() -> None:
    built = sweep(hosts=[leader("a"), follower("b", "a")], steps=2)
    a, b = built["hosts"]["a"], built["hosts"]["b"]
    assert (a["problems"], b["problems"]) == ([], [])
    assert (a["followed_by"], a["follows"], b["follows"], b["followed_by"]) == (["b"], None, "a", [])
    assert [e["config"]["id"] for e in b["entries"]] == [e["config"]["id"] for e in a["entries"]]
    assert b["entries"][1]["argv"][-6:] == ["--nnodes", "2", "--node-rank", "1", "--dist-init-addr",
                                            "10.0.0.1:25000"]  # fmt: skip


@pytest.mark.parametrize(
    ("hosts", "given", "why"),
    [
        ([leader("a"), follower("b", "b")], {}, "another targeted host that follows no one"),
        ([leader("a"), follower("b", "gone")], {}, "another targeted host that follows no one"),
        ([leader("a"), follower("b", "a"), follower("c", "b")], {},
         "another targeted host that follows no one"),
        ([leader("a"), follower("b", "a")], {"mode": "shard"}, "followed in a plain replicate sweep"),
        ([leader("a"), follower("b", "a")], {"search": "steps", "steps": "1..3"},
         "followed in a plain replicate sweep"),
    ],
)  # fmt: skip
def test_a_follower_is_refused_unless_it_follows_a_leader_in_a_plain_sweep(
    hosts: list[plan.HostInput], given: dict[str, Any], why: str
) -> None:
    built = sweep(hosts=hosts, **{"steps": 2, **given})
    refused = hosts[-1]
    problems = built["hosts"][refused.name]["problems"]
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"specsweep_follows: {refused.follows} must be {why}"), problems
    assert "the follower runs the leader's configs in order" in problems[0]
    assert built["hosts"]["a"]["problems"] == []


def test_a_rank_above_0_without_a_leader_is_refused() -> None:
    alone = plan.HostInput("b", "sglang", follower("b", "a").settings)
    problems = sweep(hosts=[leader("a"), alone], steps=2)["hosts"]["b"]["problems"]
    assert problems == [
        "node rank 1 on b needs specsweep_follows: <the rank-0 host> (it serves no requests of its own)"
    ]


# --------------------------------------------------------------------------------------
# progress: what was measured, what was not
# --------------------------------------------------------------------------------------


def test_measured_finds_only_ok_facts(tmp_path: Path) -> None:
    (tmp_path / "h1").mkdir()
    (tmp_path / "h1" / "s1.json").write_text('{"status": "ok"}')
    (tmp_path / "h1" / "s2.json").write_text('{"status": "failed"}')
    (tmp_path / "h1" / "s3.json").write_text('{"status": "ok"')  # truncated by a crash
    assert progress.measured(tmp_path, "s1", "h1") is True
    assert progress.measured(tmp_path, "s1", "h2") is False
    assert progress.measured(tmp_path, "s1", None) is True  # any host (shard mode)
    assert progress.measured(tmp_path, "s2", None) is False
    assert progress.measured(tmp_path, "s3", None) is False


def test_unmeasured_names_each_lost_host_and_the_configs_it_left(tmp_path: Path) -> None:
    configs = sweep(("llama_cpp",), steps="1,2")["sweep"]["configs"]
    for name, cid in [("a", "baseline"), ("a", "s1"), ("a", "s2"), ("b", "baseline")]:
        (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / name / f"{cid}.json").write_text("{}")
    states = {"a": "finished", "b": "lost mid-sweep"}
    lines = progress.unmeasured(tmp_path, ["a", "b", "c"], configs, {"mode": "replicate"}, states)
    assert lines == [
        "b: lost mid-sweep; not measured: s1, s2",
        "c: not reached; not measured: baseline, s1, s2",
    ]
    # Shard: hosts owe only their baselines; a speculative config nobody measured is listed once.
    # A host lost on the way is named though its share was measured (by others, or before).
    shard = progress.unmeasured(tmp_path, ["a", "b"], configs, {"mode": "shard"}, states)
    assert shard == ["b: lost mid-sweep"]
    (tmp_path / "a" / "s2.json").unlink()
    shard = progress.unmeasured(tmp_path, ["a", "b"], configs, {"mode": "shard"}, states)
    assert shard == ["b: lost mid-sweep", "(shard): not measured by any host: s2"]
    # A search owes the baselines too, and its probes are its own business.
    finished = dict.fromkeys(states, "finished")
    search = progress.unmeasured(
        tmp_path, ["a", "b"], configs, {"mode": "replicate", "search": "steps"}, finished
    )
    assert search == []


def test_facts_kept_on_their_host_are_listed_with_their_paths_and_not_as_unmeasured(tmp_path: Path) -> None:
    configs = sweep(("llama_cpp",), steps="1,2")["sweep"]["configs"]
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "baseline.json").write_text("{}")
    noted = {"a": {"specsweep_kept": [{"name": "s1", "dest": "/run/F.s1.fact.json"}]}, "b": {}}
    assert progress.kept("F", ["a", "b"], noted) == [
        "a: 1 fact(s) kept on the host, not written to the results dir: s1 at /run/F.s1.fact.json; "
        "free space, then -e resume=F records them without measuring them again"
    ]
    states = {"a": "finished", "b": "finished"}
    lines = progress.unmeasured(tmp_path, ["a"], configs, {"mode": "replicate"}, states, None, {"a": ["s1"]})
    assert lines == ["a: finished; not measured: s2"]
