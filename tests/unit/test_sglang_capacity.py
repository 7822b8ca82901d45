"""Every config of a GPU sweep runs every concurrency level at once, in a CUDA graph of its size: the
plan's argv, resolved by SGLang 0.5.23's own handlers (sglang_wheel.sglang_resolved), and the
operator's own limits refused, naming both values, where a level is above them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from sglang_wheel import sglang_resolved
from test_sglang_argv import assert_sglang_accepts, load_flags
from test_sweep_plan import IDENTITY, ONE_LAUNCH_EACH

from analysis.engines import SettingError
from analysis.engines.sglang import argv as sglang_argv
from analysis.sweep import plan, request
from analysis.sweep.config import make

REPO = Path(__file__).resolve().parents[2]


def gpu_settings(**kw: Any) -> dict[str, Any]:
    """group_vars/gpu.yml's sglang_server_* settings by short name, with the role's defaults."""
    given = yaml.safe_load((REPO / "group_vars" / "gpu.yml").read_text())
    defaults = yaml.safe_load((REPO / "roles" / "sglang_server" / "defaults" / "main.yml").read_text())
    prefix = "sglang_server_"
    merged = {**defaults, **given}
    return {k[len(prefix) :]: v for k, v in merged.items() if k.startswith(prefix)} | kw


def gpu_plan(concurrency: str, **settings: Any) -> dict[str, Any]:
    """The plan of the example GPU host at steps 1,2 and these levels (EAGLE3 and NGRAM beside the
    baseline); the test fails when it is refused."""
    host = plan.HostInput("gpu0", "sglang", gpu_settings(**settings))
    given = {**ONE_LAUNCH_EACH, "steps": "1,2", "concurrency": concurrency, "algorithm": "EAGLE3"}
    built = plan.build(request.read(given), {"gpu0": host}, IDENTITY, REPO / "results")
    assert built["errors"] == [], built["errors"]
    return built


def test_every_config_resolves_to_the_largest_level_and_graphs_of_every_level_in_sglang_0_5_23() -> None:
    entries = gpu_plan("1,16,64")["hosts"]["gpu0"]["entries"]
    assert [e["config"]["id"] for e in entries] == ["baseline", "s1", "s2"]
    for entry in entries:
        assert_sglang_accepts(entry["argv"])
        resolved = sglang_resolved(entry["argv"], load_flags())
        assert resolved["max_running_requests"] >= 64, (entry["config"]["id"], resolved)
        assert {1, 16, 64} <= set(resolved["decode_bs"]), (entry["config"]["id"], resolved)
        assert resolved["decode_max_bs"] >= 64, (entry["config"]["id"], resolved)


def test_without_the_sweeps_capacity_sglang_runs_speculation_at_48_and_the_baseline_from_memory() -> None:
    """What the sweep corrects: the same argv minus its capacity flags resolves unequally."""
    argv = sglang_argv(make(2, algorithm="EAGLE3"), gpu_settings(), 1)
    assert "--max-running-requests" not in argv
    assert sglang_resolved(argv, load_flags())["max_running_requests"] == 48
    baseline = sglang_argv(make(), gpu_settings(), 1)
    assert sglang_resolved(baseline, load_flags())["max_running_requests"] is None  # sized at start


def test_only_the_measured_levels_are_captured() -> None:
    argv = gpu_plan("1,4,16")["hosts"]["gpu0"]["entries"][1]["argv"]
    flag = argv.index("--cuda-graph-bs-decode")
    assert argv[flag : flag + 4] == ["--cuda-graph-bs-decode", "1", "4", "16"]
    assert argv[argv.index("--max-running-requests") + 1] == "16"
    assert sglang_resolved(argv, load_flags())["decode_bs"] == [1, 4, 16]


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"extra_args": ["--max-running-requests", "32"]}, "extra_args: --max-running-requests 32 is below "
         "the sweep's concurrency level 64"),
        ({"extra_args": ["--max-running-requests=48"]}, "extra_args: --max-running-requests 48 is below"),
        ({"cuda_graph_max_bs_decode": 16}, "cuda_graph_max_bs_decode: 16 is below the sweep's concurrency "
         "level 64"),
        ({"extra_args": ["--cuda-graph-bs-decode", "1", "8"]}, "extra_args: decode CUDA graphs up to 8"),
        ({"extra_args": ["--max-running-requests", "x"]}, "extra_args: --max-running-requests needs integ"),
    ],
)  # fmt: skip
def test_a_level_above_the_operators_own_limit_is_refused_naming_both(settings: dict, said: str) -> None:
    with pytest.raises(SettingError, match="^" + said.replace("-", r"\-")):
        sglang_argv(make(2, algorithm="EAGLE3"), gpu_settings(levels=[1, 16, 64], **settings), 1)
    refused = plan.build(
        request.read({**ONE_LAUNCH_EACH, "steps": "2", "concurrency": "1,16,64", "algorithm": "EAGLE3"}),
        {"gpu0": plan.HostInput("gpu0", "sglang", gpu_settings(**settings))}, IDENTITY, REPO / "results",
    )  # fmt: skip
    assert any(p.startswith("sglang_server_" + said) for p in refused["hosts"]["gpu0"]["problems"]), refused


def test_the_operators_own_values_win_when_they_cover_every_level() -> None:
    mine = ["--trust-remote-code", "--max-running-requests", "128", "--cuda-graph-max-bs-decode", "96"]
    argv = sglang_argv(make(2, algorithm="EAGLE3"), gpu_settings(levels=[1, 64], extra_args=mine), 1)
    assert argv.count("--max-running-requests") == 1 and "--cuda-graph-bs-decode" not in argv
    resolved = sglang_resolved(argv, load_flags())
    assert (resolved["max_running_requests"], resolved["decode_max_bs"]) == (128, 96)
    graphs_off = sglang_argv(make(), gpu_settings(levels=[1, 64], extra_args=["--disable-cuda-graph"]), 1)
    assert "--cuda-graph-bs-decode" not in graphs_off  # graphs off is the operator's choice
