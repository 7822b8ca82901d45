"""The benchmark client's argv on a host (analysis.sweep.client): the list the benchmark role's YAML
used to build, the one the plan builds per host, and one both clients' own parsers accept."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import pytest
import yaml
from plugin_loader import REPO, load_plugin

from analysis.sweep import client
from analysis.sweep.client import client_argv, host_argv, launch_argv

FILES = REPO / "roles" / "benchmark" / "files"

# benchmark_settings (roles/benchmark/vars/main.yml) as Ansible templates it.
SETTINGS: dict[str, Any] = {
    "client": "specsweep",
    "python": "/usr/bin/python3",
    "work_dir": "/var/tmp/specsweep/bench",
    "engine": "llama_cpp",
    "url": "http://127.0.0.1:8080",
    "prompt_set": "prompts/code.jsonl",
    "max_tokens": 96,
    "warmup": 1,
    "repeats": 3,
    "request_timeout_s": 300,
    "concurrency": [1, 4],
    "bench_requests": None,
    "bench_duration_s": "",  # how a template renders an unset value when not native
    "request_rate": None,
    "seed": 42,
    "bench_ci_pct": 3.0,
    "bench_min_requests": 8,
    "bench_level_budget_s": 60.0,
    "sglang_python": "/opt/sglang/bin/python",
    "sglang_extra_args": [],
}
# Where one launch keeps its output (benchmark_launch, but its argv).
OUTPUT = {
    "output": "/var/tmp/specsweep/sw/s1.bench.json",
    "sglang_jsonl": "/var/tmp/specsweep/sw/s1.bench_serving.jsonl",
}
# What both clients take after their own options (the old benchmark_common_args).
COMMON = [
    "--url=http://127.0.0.1:8080",
    "--prompts=/var/tmp/specsweep/bench/code.jsonl",
    "--max-tokens=96",
    "--warmup=1",
    "--repeats=3",
    "--timeout-s=300",
    "--api-key-env=SPECSWEEP_API_KEY",
    "--concurrency=1",
    "--concurrency=4",
    "--seed=42",
]


def adapter() -> ModuleType:
    """specsweep_bench_serving.py as the host runs it: beside specsweep_bench.py."""
    sys.path.insert(0, str(FILES))
    try:
        return load_plugin("roles/benchmark/files/specsweep_bench_serving.py")
    finally:
        sys.path.remove(str(FILES))


def launched(settings: dict[str, Any]) -> list[str]:
    """One launch's argv as the role hands it to specsweep_job."""
    return launch_argv({"argv": client_argv(settings), "client": settings["client"], **OUTPUT})


def test_the_specsweep_client_argv_is_exact() -> None:
    assert launched(SETTINGS) == [
        "/usr/bin/python3", "/var/tmp/specsweep/bench/specsweep_bench.py", "--engine=llama_cpp", *COMMON[:-1],
        "--ci-pct=3.0", "--min-requests=8", "--level-budget-s=60.0", COMMON[-1],
        "--output=/var/tmp/specsweep/sw/s1.bench.json",
    ]  # fmt: skip


def test_the_bench_serving_adapter_argv_is_exact() -> None:
    settings = {**SETTINGS, "client": "sglang", "engine": "sglang", "sglang_extra_args": ["--seed-x", 7]}
    assert launched(settings) == [
        "/usr/bin/python3",
        "/var/tmp/specsweep/bench/specsweep_bench_serving.py",
        "--sglang-python=/opt/sglang/bin/python",
        "--extra-arg=--seed-x",
        "--extra-arg=7",
        *COMMON,
        "--output=/var/tmp/specsweep/sw/s1.bench.json",
        "--jsonl=/var/tmp/specsweep/sw/s1.bench_serving.jsonl",
    ]


def test_both_clients_parse_what_they_are_given() -> None:
    bench = load_plugin("roles/benchmark/files/specsweep_bench.py")
    args = bench.parse_args(launched(SETTINGS)[2:])
    assert (args.engine, args.prompts, args.max_tokens, args.concurrency) == (
        "llama_cpp", "/var/tmp/specsweep/bench/code.jsonl", 96, [1, 4],
    )  # fmt: skip
    assert (args.timeout_s, args.api_key_env) == (300.0, "SPECSWEEP_API_KEY")
    settings = {**SETTINGS, "client": "sglang", "sglang_extra_args": ["--disable-tqdm"]}
    args = adapter().parse_args(launched(settings)[2:])
    assert (args.sglang_python, args.extra_arg, args.repeats) == (
        "/opt/sglang/bin/python",
        ["--disable-tqdm"],
        3,
    )


def test_a_launch_of_some_levels_names_them_and_both_clients_read_them_back() -> None:
    # A finalist's relaunch measures its close calls only: the controller names them
    # (client.level_name), the host's clients read them (parse_level) and the fact records them so.
    bench = load_plugin("roles/benchmark/files/specsweep_bench.py")
    levels = [client.level_name("chat", 4.0), client.level_name(None, 1.0)]
    assert levels == ["chat:4", "1"]
    assert [client.level_of(name) for name in levels] == [("chat", 4.0), (None, 1.0)]
    argv = launch_argv({"argv": client_argv(SETTINGS), "client": "specsweep", "levels": levels, **OUTPUT})
    assert argv[-3:] == ["--only=chat:4", "--only=1", "--output=/var/tmp/specsweep/sw/s1.bench.json"]
    args = bench.parse_args(argv[2:])
    assert args.only == [("chat", 4), (None, 1)]
    assert [bench.level_name(level) for level in args.only] == levels
    assert bench.load_settings(args)["only"] == levels
    assert bench.load_settings(bench.parse_args(launched(SETTINGS)[2:]))["only"] is None
    served = {**SETTINGS, "client": "sglang"}
    argv = launch_argv({"argv": client_argv(served), "client": "sglang", "levels": ["4"], **OUTPUT})
    assert adapter().parse_args(argv[2:]).only == [(None, 4)]


def test_a_level_the_run_does_not_measure_is_refused_and_the_others_kept() -> None:
    bench = load_plugin("roles/benchmark/files/specsweep_bench.py")
    groups = [("chat", [{"id": "a"}]), ("code", [{"id": "b"}])]
    assert bench.only_problem([("chat", 4), ("code", 1)], groups, [1, 4]) is None
    assert bench.only_problem(None, groups, [1, 4]) is None
    assert bench.only_problem([("chat", 2), ("mail", 1), ("code", 4)], groups, [1, 4]) == (
        "--only chat:2, mail:1: not a level of this run"
    )
    assert bench.measured([("chat", 4)], "chat", 4) and not bench.measured([("chat", 4)], "code", 4)
    assert bench.measured(None, "code", 1) and bench.measured([], None, 1)
    with pytest.raises(SystemExit):
        bench.parse_args([*launched(SETTINGS)[2:], "--only=chat:four"])


def test_the_prompt_set_is_read_from_the_work_dir_by_its_file_name() -> None:
    settings = {**SETTINGS, "prompt_set": "/srv/prompts/mine.jsonl", "work_dir": "/w/", "concurrency": [2]}
    argv = client_argv(settings)
    assert argv[1] == "/w/specsweep_bench.py"
    assert "--prompts=/w/mine.jsonl" in argv
    assert [a for a in argv if a.startswith("--concurrency")] == ["--concurrency=2"]


def test_an_unknown_client_is_refused_by_its_variable() -> None:
    with pytest.raises(ValueError, match=r"^benchmark_client: 'vllm' is not one of: specsweep, sglang$"):
        client_argv({**SETTINGS, "client": "vllm"})


def test_the_filter_hands_the_role_these_functions() -> None:
    filters = load_plugin("plugins/filter/specsweep_benchmark.py").FilterModule().filters()
    expected = {
        "specsweep_client_argv": client_argv,
        "specsweep_client_launch": launch_argv,
        "specsweep_install_files": client.install_files,
    }
    assert filters == expected


def test_the_role_passes_every_setting_the_function_reads() -> None:
    role_vars = yaml.safe_load((REPO / "roles" / "benchmark" / "vars" / "main.yml").read_text())
    assert set(role_vars["benchmark_settings"]) == set(SETTINGS)
    assert set(role_vars["benchmark_launch"]) == {"argv", "client", "levels", *OUTPUT}


def test_the_plans_role_defaults_are_the_roles() -> None:
    defaults = yaml.safe_load((REPO / "roles" / "benchmark" / "defaults" / "main.yml").read_text())
    given = {key: defaults[f"benchmark_{key}"] for key in client.ROLE_DEFAULTS}
    # benchmark_python is a template: the host's interpreter, else this.
    assert given.pop("python") == "{{ ansible_python_interpreter | default('/usr/bin/python3') }}"
    assert {**given, "python": "/usr/bin/python3"} == client.ROLE_DEFAULTS


def test_the_plan_builds_a_hosts_argv_from_its_role_its_server_and_the_sweeps_settings() -> None:
    settings = {"max_tokens": 64, "warmup": 0, "repeats": 2, "concurrency": [1, 4], "bench_requests": None,
                "bench_duration_s": 30.0, "request_rate": None, "seed": 7, "steps": [1], "bench_ci_pct": 3.0,
                "bench_min_requests": 8, "bench_level_budget_s": 60.0}  # fmt: skip
    role = {**client.ROLE_DEFAULTS, "client": "specsweep", "work_dir": "/w"}
    served = {"engine": "llama_cpp", "url": "http://127.0.0.1:8081", "python": None}
    assert host_argv(role, served, settings, "", {}) == [
        "/usr/bin/python3", "/w/specsweep_bench.py", "--engine=llama_cpp", "--url=http://127.0.0.1:8081",
        "--prompts=/w/code.jsonl", "--max-tokens=64", "--warmup=0", "--repeats=2", "--timeout-s=300",
        "--api-key-env=SPECSWEEP_API_KEY", "--concurrency=1", "--concurrency=4", "--ci-pct=3.0",
        "--min-requests=8", "--level-budget-s=60.0", "--duration-s=30.0", "--seed=7",
    ]  # fmt: skip
    records = "/root/.cache/specsweep/records/workloads-0123.jsonl"
    assert "--prompts=/w/workloads-0123.jsonl" in host_argv(role, served, settings, records, {})
    # The host's level rule (analysis.sweep.levelsize) replaces the sweep's interval.
    rule = {"bench_ci_pct": None, "bench_level_budget_s": 750.0, "bench_launch_cost_s": 750.0,
            "bench_launch_cv_pct": 0.5}  # fmt: skip
    argv = host_argv(role, served, settings, "", rule)
    assert argv[12:15] == ["--min-requests=8", "--level-budget-s=750.0", "--launch-cost-s=750.0"], argv
    assert "--launch-cv-pct=0.5" in argv and not any(a.startswith("--ci-pct") for a in argv)


def test_the_load_settings_reach_both_clients_and_mean_the_same_there() -> None:
    settings = {**SETTINGS, "bench_requests": 64, "request_rate": 2.5, "seed": 7}
    argv = client_argv(settings)
    assert argv[-3:] == ["--requests=64", "--request-rate=2.5", "--seed=7"]
    args = load_plugin("roles/benchmark/files/specsweep_bench.py").parse_args(launched(settings)[2:])
    assert (args.requests, args.duration_s, args.request_rate, args.seed) == (64, None, 2.5, 7)
    args = adapter().parse_args(launched({**settings, "client": "sglang"})[2:])
    assert (args.requests, args.duration_s, args.request_rate, args.seed) == (64, None, 2.5, 7)


def test_the_stopping_rule_reaches_specsweeps_client_only() -> None:
    argv = client_argv({**SETTINGS, "bench_ci_pct": 5, "bench_min_requests": 12, "bench_level_budget_s": 30})
    args = load_plugin("roles/benchmark/files/specsweep_bench.py").parse_args(argv[2:])
    assert (args.ci_pct, args.min_requests, args.level_budget_s) == (5.0, 12, 30.0)
    sglang = client_argv({**SETTINGS, "client": "sglang"})
    assert not [a for a in sglang if a.startswith(("--ci-pct", "--min-requests", "--level-budget-s"))]


def test_the_installed_files_are_named_at_their_host_path_with_their_mode_and_text() -> None:
    files = [
        {"src": "bench.py", "dest": "bench.py", "mode": "0644"},
        {"src": "/p.jsonl", "dest": "p.jsonl", "mode": "0600"},
    ]
    got = client.install_files({"files": files, "work_dir": "/var/tmp/b", "texts": ["print(1)\n", "é\n"]})
    assert got == [
        {"dest": "/var/tmp/b/bench.py", "mode": "0644", "content": "print(1)\n"},
        {"dest": "/var/tmp/b/p.jsonl", "mode": "0600", "content": "é\n"},
    ], got
    with pytest.raises(ValueError):
        client.install_files({"files": files, "work_dir": "/var/tmp/b", "texts": ["one text, two files"]})
