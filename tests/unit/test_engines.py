"""The list of engines has one owner (analysis.engines.ENGINES): every `choices` of an engine, every
host-side table keyed by engine (stdlib-only files that cannot import it) and every engine role
are checked against it, and each engine module declares what the interface asks."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import yaml

from analysis.engines import DEFAULT, ENGINES, NAMES, with_axis
from analysis.sweep import config

REPO = Path(__file__).resolve().parents[2]

# Where a role's argument_specs name an engine: (role, entry point, option).
ENGINE_OPTIONS = [
    ("wait_for_health", "main", "wait_for_health_engine"),
    ("benchmark", "main", "benchmark_engine"),
    ("benchmark", "install", "benchmark_engine"),
]
# Host-side tables keyed by engine name: (file, the module-level dict).
HOST_TABLES = [
    ("plugins/modules/specsweep_wait.py", "PROBE"),  # readiness: the one-token generation
    ("roles/benchmark/files/specsweep_bench.py", "ADAPTERS"),  # the request and stream adapter
    ("roles/benchmark/files/specsweep_serverload.py", "METRICS"),  # the server-load probe's gauges
]


def dict_keys(path: Path, name: str) -> set[str]:
    """The string keys of the module-level dict `name` in a Python file (read, not imported: host-side
    files import Ansible's module_utils or each other)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and isinstance(
            node.value, ast.Dict
        ):
            return {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    raise AssertionError(f"{path}: no dict {name}")


@pytest.mark.parametrize(("role", "entry", "option"), ENGINE_OPTIONS)
def test_every_engine_choices_list_is_the_registry(role: str, entry: str, option: str) -> None:
    spec = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    choices = spec["argument_specs"][entry]["options"][option]["choices"]
    assert choices == list(NAMES)


def test_the_wait_modules_documented_choices_are_the_registry() -> None:
    source = (REPO / "plugins" / "modules" / "specsweep_wait.py").read_text()
    doc = next(
        n.value.value
        for n in ast.parse(source).body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "DOCUMENTATION"
    )
    assert yaml.safe_load(doc)["options"]["engine"]["choices"] == list(NAMES)


@pytest.mark.parametrize(("path", "name"), HOST_TABLES)
def test_every_host_side_table_has_one_entry_per_engine(path: str, name: str) -> None:
    assert dict_keys(REPO / path, name) == set(NAMES)


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
