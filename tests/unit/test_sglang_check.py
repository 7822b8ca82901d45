"""Preflight's check of every planned argv by the host's own SGLang: the launcher the role runs there
(roles/sglang_server/files/specsweep_sglang_check.py), run here against a stand-in `sglang` package
with the same entry points (the real one needs torch and a GPU), and the filters that turn its
answer into the host's problems (analysis.engines.sglang)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from local_play import run_local_play
from test_sglang_capacity import gpu_plan

from analysis.engines.sglang import check_input as sglang_check_input
from analysis.engines.sglang import found as sglang_found
from analysis.redact import REDACTED

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "roles" / "sglang_server" / "files" / "specsweep_sglang_check.py"

# prepare_server_args parses (argparse exits 2 on an unknown flag); resolve_once refuses a rule, and
# exports a variable as SGLang's handlers do, which must not leak into the next config's resolution.
SERVER_ARGS = """
import argparse, os

class ServerArgs:
    def __init__(self, ns):
        self.ns = ns
    def resolve_once(self):
        if "SGLANG_LEAKED" in os.environ:
            raise RuntimeError("the environment of an earlier resolution leaked")
        os.environ["SGLANG_LEAKED"] = "1"
        if os.environ.get("SGLANG_SPEC_STRICT") == "1" and self.ns.max_running_requests:
            raise ValueError("--max-running-requests is not allowed with SGLANG_SPEC_STRICT=1")
        if self.ns.speculative_eagle_topk and self.ns.speculative_eagle_topk > 1:
            raise ValueError("--speculative-eagle-topk 4 is not supported with --speculative-adaptive")

def prepare_server_args(argv):
    parser = argparse.ArgumentParser(prog="sglang serve")
    parser.add_argument("--model-path")
    parser.add_argument("--max-running-requests", type=int)
    parser.add_argument("--speculative-eagle-topk", type=int)
    parser.add_argument("--api-key")
    parser.add_argument("--cuda-graph-max-bs-decode", type=int)
    parser.add_argument("--cuda-graph-max-bs-prefill", type=int)
    return ServerArgs(parser.parse_args(argv))
"""


def stand_in(root: Path, commit: str | None) -> Path:
    """A `sglang` 0.5.23 package under root, installed from git at `commit` (None: from a wheel)."""
    (root / "sglang" / "srt").mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text('__version__ = "0.5.23"\n')
    (root / "sglang" / "srt" / "__init__.py").write_text("")
    (root / "sglang" / "srt" / "server_args.py").write_text(SERVER_ARGS)
    meta = root / "sglang-0.5.23.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.23\n")
    if commit:
        url = {"url": "https://example.invalid/sglang.git", "vcs_info": {"vcs": "git", "commit_id": commit}}
        (meta / "direct_url.json").write_text(json.dumps(url))
    return root


def run_check(
    pythonpath: Path, argvs: dict[str, list[str]], envs: dict[str, dict[str, str]] | None = None
) -> dict[str, Any]:
    """The launcher as the role runs it: `python -c <its text>`, the plan's argvs on stdin."""
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.read_text()],
        input=json.dumps({"argvs": argvs, "envs": envs or {}}),
        capture_output=True, text=True, env=env, check=True, timeout=60,
    )  # fmt: skip
    return json.loads(done.stdout)


def test_every_argv_is_parsed_and_resolved_and_each_refusal_names_the_flag(tmp_path: Path) -> None:
    found = run_check(
        stand_in(tmp_path, "0123abc"),
        {
            "baseline": ["--model-path", "/m", "--max-running-requests", "64"],
            "s2": ["--model-path", "/m", "--max-running-requests", "64"],  # resolved after baseline's env
            "typo": ["--model-path", "/m", "--max-runing-requests", "64"],
            "k4": ["--model-path", "/m", "--speculative-eagle-topk", "4"],
            "bad-int": ["--max-running-requests", "sixty"],
            # An older release's spelling: 0.5.23's own check answered exactly this (docs/gpu-hosts.md).
            "old-flag": ["--model-path", "/m", "--cuda-graph-max-bs", "64"],
        },
    )
    assert (found["version"], found["git_sha"], found["error"]) == ("0.5.23", "0123abc", None)
    results = found["results"]
    assert results["baseline"] is None and results["s2"] is None, results
    assert (
        results["typo"]["flag"] == "--max-runing-requests"
        and "unrecognized arguments" in results["typo"]["message"]
    )
    assert results["k4"] == {
        "flag": "--speculative-eagle-topk",
        "message": "ValueError: --speculative-eagle-topk 4 is not supported with --speculative-adaptive",
    }
    assert (
        results["bad-int"]["flag"] == "--max-running-requests"
        and "invalid int value" in results["bad-int"]["message"]
    )
    assert results["old-flag"] == {
        "flag": "--cuda-graph-max-bs",
        "message": "sglang serve: error: ambiguous option: --cuda-graph-max-bs could match "
        "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill",
    }


def test_each_config_resolves_under_its_own_sglang_variables(tmp_path: Path) -> None:
    argv = ["--model-path", "/m", "--max-running-requests", "64"]
    found = run_check(
        stand_in(tmp_path, None),
        {"strict": argv, "plain": argv},
        {"strict": {"SGLANG_SPEC_STRICT": "1"}},
    )
    assert found["results"]["plain"] is None  # strict's variable did not stay for the next config
    assert found["results"]["strict"] == {
        "flag": "--max-running-requests",
        "message": "ValueError: --max-running-requests is not allowed with SGLANG_SPEC_STRICT=1",
    }


def test_a_wheel_install_has_no_git_sha_and_a_broken_sglang_is_reported_not_raised(tmp_path: Path) -> None:
    assert run_check(stand_in(tmp_path / "wheel", None), {})["git_sha"] is None
    broken = stand_in(tmp_path / "broken", None)
    (broken / "sglang" / "srt" / "server_args.py").write_text("import torch\n")
    found = run_check(broken, {"baseline": []})
    assert found["error"] == "ModuleNotFoundError: No module named 'torch'" and found["results"] == {}


def test_the_input_is_each_planned_configs_flags_with_the_api_key_redacted() -> None:
    entries = gpu_plan("1,8", api_key="s3cret")["hosts"]["gpu0"]["entries"]
    argvs = sglang_check_input(entries)["argvs"]
    assert list(argvs) == ["baseline", "s1", "s2"]
    assert argvs["s1"][:2] == ["--model-path", "/data/models/Kimi-K2.5-int4"]
    assert "s3cret" not in json.dumps(argvs) and REDACTED in argvs["s1"]


def test_the_input_holds_each_configs_sglang_variables_and_no_others() -> None:
    entries = gpu_plan("1,8")["hosts"]["gpu0"]["entries"]
    entries[1] = {**entries[1], "env": {**entries[1]["env"], "SGLANG_SPEC_STRICT": "1", "HF_TOKEN": "t"}}
    envs = sglang_check_input(entries)["envs"]
    assert "NCCL_PROTO" in entries[0]["env"]  # the example's NCCL tuning: not SGLang's to read
    assert envs == {"baseline": {}, "s1": {"SGLANG_SPEC_STRICT": "1"}, "s2": {}}


ON = {"host": "gpu0", "version": "0.5.23"}


def checked(found: dict[str, Any]) -> dict[str, Any]:
    """The registered command's result, as the role hands it to specsweep_engine_found."""
    return {"stdout": json.dumps(found), "rc": 0}


def test_a_refusal_names_host_config_flag_and_sglangs_message() -> None:
    why = {"flag": "--speculative-eagle-topk", "message": "ValueError: topk 4 is not supported"}
    got = sglang_found(
        checked({"version": "0.5.23", "git_sha": None, "results": {"s2": None, "k4": why}}), ON
    )
    assert got == {
        "version": "0.5.23",
        "git_sha": None,
        "problems": [
            "gpu0: k4: SGLang 0.5.23 refuses --speculative-eagle-topk: ValueError: topk 4 is not supported"
        ],
    }


@pytest.mark.parametrize(
    ("found", "problem"),
    [
        ({"version": "0.5.10", "results": {}}, "sglang_server_version: gpu0 runs SGLang 0.5.10, whose flags "
         "differ from those of 0.5.23 the plan was spelt for; set sglang_server_version: 0.5.10"),
        ({"version": "0.4.9", "results": {}}, "sglang_server_version: gpu0: SGLang 0.4.9 is older than 0.5"),
        ({"version": None, "error": "ModuleNotFoundError: No module named 'torch'", "results": {}},
         "sglang_server_python: gpu0: SGLang's parser cannot be imported: ModuleNotFoundError"),
    ],
)  # fmt: skip
def test_another_release_or_an_unimportable_sglang_stops_the_host(
    found: dict[str, Any], problem: str
) -> None:
    problems = sglang_found(checked({"git_sha": None, **found}), ON)["problems"]
    assert len(problems) == 1 and problems[0].startswith(problem), problems


def test_a_release_of_the_same_row_passes_and_a_skipped_check_adds_nothing() -> None:
    same_row = {"version": "0.5.21", "git_sha": "abc", "results": {"baseline": None}}
    assert sglang_found(checked(same_row), ON)["problems"] == []
    assert sglang_found({"skipped": True, "changed": False}, ON) == {
        "version": None,
        "git_sha": None,
        "problems": [],
    }


def test_the_roles_preflight_refuses_what_the_hosts_sglang_refuses_and_records_its_version(
    tmp_path: Path,
) -> None:
    """roles/sglang_server run by ansible-playbook, its interpreter one that imports the stand-in."""
    # A venv (the host facts check imports in isolated mode: PYTHONPATH is not read there).
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    python = tmp_path / "venv" / "bin" / "python"
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    stand_in(site, "feed42")
    flags = ["--model-path", "org/model"]
    planned = [
        {"config": {"id": "s2"}, "argv": [str(python), "-m", "sglang.launch_server", *flags]},
        {"config": {"id": "k4"}, "argv": [str(python), "-m", "sglang.launch_server", *flags,
                                          "--speculative-eagle-topk", "4"]},
    ]  # fmt: skip
    role_vars = {"sglang_server_python": str(python), "sglang_server_model_path": "org/model",
                 "sglang_server_planned": planned}  # fmt: skip
    out = tmp_path / "preflight.json"
    tasks = [
        {"ansible.builtin.include_role": {"name": "sglang_server"}, "vars": role_vars},
        {"ansible.builtin.copy": {"content": "{{ sglang_server_preflight | to_json }}", "dest": str(out)}},
    ]
    res = run_local_play(tmp_path, tasks)
    assert res.returncode == 0, res.stdout + res.stderr
    got = json.loads(out.read_text())
    assert (got["version"], got["git_sha"]) == ("0.5.23", "feed42"), got
    assert got["problems"] == [
        "localhost: k4: SGLang 0.5.23 refuses --speculative-eagle-topk: ValueError: "
        "--speculative-eagle-topk 4 is not supported with --speculative-adaptive"
    ], got["problems"]
