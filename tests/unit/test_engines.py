"""The list of engines has one owner (analysis.engines.ENGINES): the roles' engine options say so,
the two host-side tables keyed by engine (stdlib-only files that cannot import it: the benchmark's
and the modules'), and every engine role are checked against it, the files all engines share name
none, and each engine module declares what the interface asks."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest
import specsweep_bench as bench
import specsweep_bench_engines as bench_engines
import yaml
from module_runner import module_utils, run_module

from analysis.engines import DEFAULT, ENGINES, NAMES, with_axis
from analysis.sweep import config

REPO = Path(__file__).resolve().parents[2]
module_engines = module_utils("specsweep_engines")
logs = module_utils("specsweep_logs")

# Where a role's argument_specs name an engine: (role, entry point, option).
ENGINE_OPTIONS = [
    ("wait_for_health", "main", "wait_for_health_engine"),
    ("benchmark", "main", "benchmark_engine"),
    ("benchmark", "install", "benchmark_engine"),
]
# The files every engine goes through, which name none: an engine's knowledge is in the two
# host-side tables and its own module and role.
SHARED_FILES = [
    "roles/benchmark/files/specsweep_bench.py",
    "roles/benchmark/files/specsweep_serverload.py",
    "plugins/modules/specsweep_wait.py",
    "plugins/module_utils/specsweep_logs.py",
]


@pytest.mark.parametrize(("role", "entry", "option"), ENGINE_OPTIONS)
def test_every_engine_option_is_documented_as_the_registry(role: str, entry: str, option: str) -> None:
    """No `choices` to keep in step: the option says where the list is, and its value is checked
    against it (the plan, the client's --engine, the wait module's argument spec)."""
    spec = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    found = spec["argument_specs"][entry]["options"][option]
    assert "choices" not in found and "analysis/engines" in found["description"]
    assert found["default"] == DEFAULT


def test_the_wait_module_refuses_an_engine_outside_the_registry() -> None:
    result = run_module("specsweep_wait", {"engine": "no_such_engine", "url": "http://127.0.0.1:9",
                                           "pidfile": "/nonexistent", "timeout_s": 1})  # fmt: skip
    assert result["failed"] and "no_such_engine" in result["msg"]
    assert all(name in result["msg"] for name in NAMES), result["msg"]


def test_the_benchmark_client_refuses_an_engine_outside_the_registry() -> None:
    with pytest.raises(SystemExit):
        bench.parse_args(["--engine", "no_such_engine", "--url", "http://127.0.0.1:9", "--prompts", "p"])
    assert sorted(bench_engines.ENGINES) == sorted(NAMES)


def test_each_host_side_table_has_one_entry_per_engine() -> None:
    assert list(bench_engines.ENGINES) == list(module_engines.ENGINES) == list(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_each_engines_host_side_entries_are_whole(name: str) -> None:
    """The benchmark's entry: an endpoint, a body that asks for a streamed answer, two gauges, four
    counters or none; the modules': a one-token probe and failures of causes the log reader orders."""
    bench_entry, module_entry = bench_engines.ENGINES[name], module_engines.ENGINES[name]
    assert bench_entry.path.startswith("/") and bench_entry.body("Hello", 4)["stream"] is True
    assert len(bench_entry.gauges) == 2 and all(":" in g for g in bench_entry.gauges)
    assert bench_entry.spec_counters is None or len(bench_entry.spec_counters) == 4
    path, body = module_entry["probe"]
    assert path.startswith("/") and json.dumps(body)
    for cause, pattern in module_entry["failures"]:
        assert cause in logs.CAUSES and re.compile(pattern)


def test_an_engines_own_failure_messages_are_not_in_the_shared_list() -> None:
    """The shared list keeps what no engine owns (OS, CUDA, NCCL, Python libraries); each cause has
    a pattern, from the shared list or an engine's, and every cause the log reader knows is used."""
    shared = {pattern for _, pattern in logs.SHARED_PATTERNS}
    own = [f for entry in module_engines.ENGINES.values() for f in entry["failures"]]
    assert not shared & {pattern for _, pattern in own}
    assert [cause for cause, _ in logs.FAILURE_PATTERNS] == list(logs.CAUSES)


@pytest.mark.parametrize("path", SHARED_FILES)
def test_the_shared_host_side_files_name_no_engine(path: str) -> None:
    tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
    named = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in NAMES}
    assert named == set(), named


def test_the_sweep_playbook_names_no_engine() -> None:
    text = (REPO / "playbooks" / "sweep.yml").read_text()
    assert not [n for n in NAMES if n in text or ENGINES[n].role in text]


@pytest.mark.parametrize("name", NAMES)
def test_each_engine_has_its_preflight_role_and_documents_every_setting_it_reads(name: str) -> None:
    engine = ENGINES[name]
    role = REPO / "roles" / engine.role
    options: dict[str, Any] = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())[
        "argument_specs"
    ]["main"]["options"]
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text())
    assert {f"{engine.role}_{s}" for s in engine.settings} <= set(options)
    assert set(options) == set(defaults) | {n for n, o in options.items() if o.get("required")}
    # The role tells the sweep what it found: `<role>_preflight` (playbooks/sweep.yml reads it).
    assert f"{engine.role}_preflight:" in (role / "tasks" / "main.yml").read_text()


@pytest.mark.parametrize("name", NAMES)
def test_each_engine_declares_what_a_grid_point_can_be(name: str) -> None:
    engine = ENGINES[name]
    assert engine.name == name and engine.algorithms and engine.clients[0] == "specsweep"
    assert engine.axes <= {a.name for a in config.AXES[1:]}
    for algorithm in engine.algorithms:
        assert engine.problems(config.make(2, algorithm=algorithm)) == [], algorithm
    assert engine.problems(config.make(2, algorithm="no-such-method")) != []


def test_the_sweep_axes_are_read_from_the_engines() -> None:
    assert {a.name: a.engines for a in config.AXES} == {
        "steps": NAMES,
        "topk": with_axis("topk"),
        "draft_tokens": with_axis("draft_tokens"),
        "overlap_schedule": with_axis("overlap_schedule"),
    }
    assert with_axis("topk") == ("sglang",) and DEFAULT == "llama_cpp"


def test_an_example_group_per_engine_names_it() -> None:
    """Each engine has group_vars naming it (cpu.yml: the embedded default), and an inventory with
    that group."""
    loaded = {p.stem: yaml.safe_load(p.read_text()) or {} for p in (REPO / "group_vars").glob("*.yml")}
    named = {v.get("specsweep_engine"): group for group, v in loaded.items()}
    assert set(NAMES) <= set(named)
    inventories = " ".join(p.read_text() for p in (REPO / "inventory").glob("*.yml"))
    assert all(f"{named[name]}:" in inventories for name in NAMES)
