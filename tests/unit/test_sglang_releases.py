"""The SGLang release table (analysis.engines.sglang_releases), checked against each release's wheel:
the argv rendered for a release uses only flags that release's parser has, its adaptive keys and
built-in schedule are the ones its adaptive_spec_params.py reads; the plan refuses a schedule key
the host's release would ignore and says where the adaptive schedule stops speculating."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from sglang_wheel import sglang_source
from test_sglang_argv import _field_options, _manual_options, sglang_flags_from_source
from test_sglang_capacity import gpu_settings
from test_sweep_plan import IDENTITY, ONE_LAUNCH_EACH

from analysis.engines import SettingError, sglang_releases
from analysis.engines.sglang import argv as sglang_argv
from analysis.sweep import plan, request
from analysis.sweep.config import make

# The first release of each row whose wheel is small enough to fetch in CI, and 0.5.23.
CHECKED = ("0.5.10", "0.5.11", "0.5.13", "0.5.14", "0.5.23")


def release_flags(package: Path) -> set[str]:
    """Every `--flag` of `python -m sglang.launch_server` in an unpacked release: 0.5.20 on from its
    field namespaces, before from ServerArgs' annotated fields and its add_argument calls."""
    server_args = package / "srt" / "server_args.py"
    if "_INPUT_NAMESPACES" in server_args.read_text(encoding="utf-8"):
        return set(sglang_flags_from_source(package))
    tree = ast.parse(server_args.read_text(encoding="utf-8"))
    flags = set(_manual_options(tree))
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs"):
        for stmt in cls.body:
            if isinstance(stmt, ast.AnnAssign):
                flags |= set(_field_options(stmt))
    return flags


def adaptive_source(version: str) -> tuple[set[str], dict[int, tuple[int, ...]], bool]:
    """What a release's adaptive_spec_params.py reads of a schedule: the keys it gets, its built-in
    schedule, and whether it routes by batch-size keys (`key.isdigit()`)."""
    path = sglang_source("sglang/srt/speculative/", version=version) / "srt" / "speculative"
    tree = ast.parse((path / "adaptive_spec_params.py").read_text(encoding="utf-8"))
    keys = {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "get" and node.args
        and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
    } | {
        node.slice.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    }  # fmt: skip
    builtin: dict[int, tuple[int, ...]] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == "DEFAULT_ADAPTIVE_CONFIG":
            value = ast.literal_eval(node.value)  # type: ignore[attr-defined]
            builtin = {int(k): tuple(v["candidate_steps"]) for k, v in value.items()}
    return keys, builtin, "isdigit" in ast.unparse(tree)


@pytest.mark.parametrize("version", CHECKED)
def test_the_argv_rendered_for_a_release_uses_only_its_flags(version: str) -> None:
    flags = release_flags(sglang_source("sglang/srt/", version=version))
    row = sglang_releases.release(version)
    settings = gpu_settings(version=version, levels=[1, 16, 64], extra_args=[])
    rendered = [
        sglang_argv(make(2, algorithm="EAGLE3"), settings, 1),
        sglang_argv(make(), settings | {"cuda_graph_max_bs_decode": 64}, 1),
        sglang_argv(make(2, algorithm="EAGLE3", overlap_schedule=False), settings, 1),
    ]
    if row.adaptive_keys:
        adaptive = make(3, 1, 4, algorithm="EAGLE3", adaptive=True)
        rendered.append(sglang_argv(adaptive, settings | {"adaptive_config_path": "/tmp/s.json"}, 1))
    used = {w for argv in rendered for w in argv if w.startswith("--")}
    assert {row.graph_bs_flag, row.graph_max_bs_flag} <= used
    assert used <= flags, f"SGLang {version} has no {sorted(used - flags)}"


@pytest.mark.parametrize("version", CHECKED)
def test_the_adaptive_keys_and_built_in_schedule_are_what_the_release_reads(version: str) -> None:
    row = sglang_releases.release(version)
    if row is sglang_releases.RELEASES[0]:  # no adaptive speculation at all
        assert "--speculative-adaptive" not in release_flags(sglang_source("sglang/srt/", version=version))
        return
    keys, builtin, by_batch_size = adaptive_source(version)
    assert by_batch_size == bool(row.adaptive_keys), version
    if row.adaptive_keys:
        assert row.adaptive_keys == keys, version
    assert dict(row.builtin_schedule) == builtin, version


@pytest.mark.parametrize(
    ("version", "row"),
    [("0.5.1", "0.5.1"), ("0.5.10", "0.5.1"), ("0.5.15.post1", "0.5.14"), ("0.5.23", "0.5.20"),
     ("0.5.24", "main"), ("0.5.23.dev40+g1a2b3c", "0.5.20"), ("main", "main")],
)  # fmt: skip
def test_a_version_finds_its_row(version: str, row: str) -> None:
    assert sglang_releases.release(version).since == row


@pytest.mark.parametrize("version", ["0.4.10", "latest"])
def test_a_version_outside_the_table_is_refused_naming_the_setting(version: str) -> None:
    with pytest.raises(SettingError, match=r"^version: "):
        sglang_argv(make(), gpu_settings(version=version), 1)


def test_older_releases_get_the_graph_flags_they_spell() -> None:
    old = sglang_argv(make(2, algorithm="EAGLE3"), gpu_settings(version="0.5.10", levels=[1, 8]), 1)
    assert old[old.index("--cuda-graph-bs") :][:3] == ["--cuda-graph-bs", "1", "8"]
    new = sglang_argv(make(2, algorithm="EAGLE3"), gpu_settings(version="0.5.23", levels=[1, 8]), 1)
    assert "--cuda-graph-bs-decode" in new and "--cuda-graph-bs" not in new


def adaptive_plan(
    tmp_path: Path, schedule: dict[str, Any] | str, version: str, **given: Any
) -> dict[str, Any]:
    if isinstance(schedule, dict):
        path = tmp_path / "schedule.json"
        path.write_text(json.dumps(schedule))
        schedule = str(path)
    host = plan.HostInput("gpu0", "sglang", gpu_settings(version=version), run_dir="/var/tmp/specsweep")
    asked = {**ONE_LAUNCH_EACH, "steps": "2", "adaptive_config": schedule, **given}
    return plan.build(request.read(asked), {"gpu0": host}, IDENTITY, tmp_path)


@pytest.mark.parametrize(
    ("schedule", "version", "ignored"),
    [
        ({"1": {"candidate_steps": [1, 3]}, "strategy": "ema"}, "0.5.23", "strategy"),
        ({"1": {"candidate_steps": [1, 3], "probe": 2}}, "0.5.23", "1.probe"),
        ({"1": {"candidate_steps": [1, 3]}, "ema_alpha": 0.3}, "0.5.11", "has no per-batch-size schedule"),
        ({"1": {"candidate_steps": [1, 3]}}, "0.5.10", "has no per-batch-size schedule"),
    ],
)
def test_a_schedule_key_the_hosts_release_would_ignore_is_refused(
    tmp_path: Path, schedule: dict[str, Any], version: str, ignored: str
) -> None:
    built = adaptive_plan(tmp_path, schedule, version)
    assert any(
        e.startswith(f"adaptive_config: SGLang {version} on gpu0 ") and ignored in e for e in built["errors"]
    ), built["errors"]


def test_main_reads_the_strategy_key_and_global_keys_are_read_everywhere(tmp_path: Path) -> None:
    on_main = adaptive_plan(tmp_path, {"1": {"candidate_steps": [1, 3]}, "strategy": "ema"}, "main")
    assert on_main["errors"] == []
    merged = adaptive_plan(tmp_path, {"1": {"candidate_steps": [1, 3]}, "warmup_batches": 4}, "0.5.23")
    assert merged["errors"] == []  # AdaptiveSpeculativeParams: cfg={**cfg, **entry}


def test_the_built_in_schedule_runs_without_a_file_and_says_where_it_stops_speculating(
    tmp_path: Path,
) -> None:
    built = adaptive_plan(tmp_path, "builtin", "0.5.23", concurrency="1,16,64")
    assert built["errors"] == []
    host = built["hosts"]["gpu0"]
    (arm,) = [e for e in host["entries"] if e["config"]["adaptive"]]
    assert "--speculative-adaptive" in arm["argv"] and "--speculative-adaptive-config" not in arm["argv"]
    assert host["adaptive_config"] is None
    assert arm["config"]["steps"] == 3  # the middle of 0.5.23's candidates 0, 1, 3, 5, 7
    note = "adaptive: SGLang's built-in adaptive schedule (speculative/adaptive_spec_params.py "
    note += "DEFAULT_ADAPTIVE_CONFIG) stops speculating at batch >= 64: at concurrency 64 the adaptive arm "
    assert any(w.startswith(note) for w in built["sweep"]["warnings"]), built["sweep"]["warnings"]
    assert any(
        line.startswith(f"  grid: {note}") for line in plan.describe(plan.document(built)).splitlines()
    )


def test_a_schedule_that_speculates_at_every_batch_size_has_no_note(tmp_path: Path) -> None:
    built = adaptive_plan(
        tmp_path, {"1": {"candidate_steps": [1, 3]}, "64": {"candidate_steps": [1]}}, "0.5.23"
    )
    assert built["errors"] == [] and not [w for w in built["sweep"]["warnings"] if w.startswith("adaptive")]
