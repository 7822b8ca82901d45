"""The llama-server argv filter (plugins/filter/specsweep_llama_cpp.py): exact lists, verbatim words."""

from __future__ import annotations

from typing import Any

import pytest
from plugin_loader import load_plugin

llama = load_plugin("plugins/filter/specsweep_llama_cpp.py")

# What roles/llama_server/vars/main.yml hands the filter (llama_server_settings), with its defaults.
SERVER: dict[str, Any] = {
    "command": ["/opt/specsweep/llama.cpp-venv/bin/python", "/opt/specsweep/specsweep_llama_server.py"],
    "model_path": "/opt/specsweep/models/gemma-3-270m-q4_k_m.gguf",
    "host": "127.0.0.1",
    "port": 8080,
    "ctx_size": 2048,
    "parallel": 1,
    "metrics": True,
    "ngram_n_match": 4,
    "ngram_n_min": 1,
    "extra_args": [],
}
BASELINE = {"id": "baseline", "speculative": False, "algorithm": None, "steps": None, "topk": None,
            "draft_tokens": None, "env_profile": "default"}  # fmt: skip
S4 = {**BASELINE, "id": "s4", "speculative": True, "steps": 4}
COMMON = [
    "/opt/specsweep/llama.cpp-venv/bin/python", "/opt/specsweep/specsweep_llama_server.py",
    "-m", "/opt/specsweep/models/gemma-3-270m-q4_k_m.gguf",
    "--host", "127.0.0.1", "--port", "8080",
    "-c", "2048", "-np", "1",
    "--metrics",
]  # fmt: skip


def test_baseline_argv_is_exact() -> None:
    assert llama.llama_cpp_argv(BASELINE, SERVER) == COMMON


def test_steps_become_the_ngram_draft_length() -> None:
    assert llama.llama_cpp_argv(S4, SERVER) == [
        *COMMON,
        "--spec-type", "ngram-mod",
        "--spec-ngram-mod-n-match", "4",
        "--spec-ngram-mod-n-min", "1",
        "--spec-ngram-mod-n-max", "4",
    ]  # fmt: skip


def test_explicit_ngram_mod_algorithm_is_the_same_as_the_default() -> None:
    assert llama.llama_cpp_argv({**S4, "algorithm": "ngram-mod"}, SERVER) == llama.llama_cpp_argv(S4, SERVER)


def test_extra_args_come_last_and_metrics_can_be_left_out() -> None:
    server = {**SERVER, "metrics": False, "extra_args": ["--no-warmup", "--log-verbosity", 4]}
    argv = llama.llama_cpp_argv(S4, server)
    assert "--metrics" not in argv
    assert argv[-9:] == [
        "--spec-ngram-mod-n-match", "4", "--spec-ngram-mod-n-min", "1", "--spec-ngram-mod-n-max", "4",
        "--no-warmup", "--log-verbosity", "4",
    ]  # fmt: skip


def test_a_hostile_model_path_stays_one_verbatim_argv_element() -> None:
    path = "/models/my \"quoted\" 'model' $(touch /tmp/x) `id`; rm -rf ~ %n.gguf"
    argv = llama.llama_cpp_argv(BASELINE, {**SERVER, "model_path": path})
    assert argv[argv.index("-m") + 1] == path
    assert argv.count(path) == 1
    assert len(argv) == len(COMMON)


def test_topk_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"^topk: .*no topk"):
        llama.llama_cpp_argv({**S4, "id": "s4-k1-d5", "topk": 1, "draft_tokens": 5}, SERVER)


@pytest.mark.parametrize("algorithm", ["EAGLE3", "NGRAM", "ngram-simple"])
def test_algorithms_other_than_ngram_mod_are_refused_by_name(algorithm: str) -> None:
    with pytest.raises(
        ValueError, match=rf"^algorithm: llama_cpp supports ngram-mod only, got '{algorithm}'$"
    ):
        llama.llama_cpp_argv({**S4, "algorithm": algorithm}, SERVER)


def test_the_filter_is_registered_for_ansible() -> None:
    assert llama.FilterModule().filters() == {"llama_cpp_argv": llama.llama_cpp_argv}
