"""analysis/'s import graph: no module imports itself round a circle, and the layers point one way.

The sweep's own modules (configs, request, plan, order, claims) sit below the facts (whose schema
holds a sweep config), so nothing in analysis/sweep may import analysis/facts; what reads facts
while a sweep runs lives above both (analysis/running). Imports inside functions count too: a
deferred import hides a circle, it does not remove it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from plugin_loader import REPO

ROOT = REPO / "analysis"


def _name(path: Path) -> str:
    """The dotted module name of a file under analysis/."""
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Each analysis module and the analysis modules it imports (a package counts as its __init__)."""
    modules = {_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom) and node.module in modules:
                # `from analysis.sweep import claims` imports the submodule; `from x.y import f` imports x.y.
                subs = {f"{node.module}.{a.name}" for a in node.names} & modules.keys()
                targets |= subs or {node.module}
        graph[name] = targets - {name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle, each found once from the module where the walk entered it."""
    found: list[list[str]] = []
    state: dict[str, str] = {}

    def visit(name: str, stack: list[str]) -> None:
        state[name] = "open"
        for target in sorted(graph.get(name, ())):
            if state.get(target) == "open":
                found.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target, [*stack, target])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return found


def test_the_walk_finds_a_circle_and_an_arrow_it_is_shown() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    graph = import_graph()
    assert "analysis.facts.schema" in graph["analysis.facts.rows"], graph["analysis.facts.rows"]
    assert "analysis.sweep.claims" in graph["analysis.running.progress"], graph["analysis.running.progress"]


def test_analysis_has_no_import_circle() -> None:
    assert circles(import_graph()) == []


@pytest.mark.parametrize(("lower", "upper"), [("analysis.sweep", "analysis.facts")])
def test_no_import_runs_back_up_the_layers(lower: str, upper: str) -> None:
    upward = sorted(
        f"{name} imports {target}"
        for name, targets in import_graph().items()
        if name.startswith(f"{lower}.") or name == lower
        for target in targets
        if target.startswith(f"{upper}.") or target == upper
    )
    assert upward == []
