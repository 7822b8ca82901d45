"""analysis/'s import graph: no module imports itself round a circle, and every import points down the layers.

LAYERS lists analysis/'s packages and top-level modules from the top down, as docs/design.md does: a
module may import its own package and anything on a line below its own, nothing beside it or above
it. The sweep's own modules (configs, request, plan, order, claims) sit below the facts (whose schema
holds a sweep config); what reads facts while a sweep runs lives above both (analysis/running).
Imports inside functions count too: a deferred import hides a circle, it does not remove it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from plugin_loader import REPO

ROOT = REPO / "analysis"

# Top first; each line may import only the lines below it. docs/design.md lists the same lines.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__main__",),
    ("cli", "watch"),
    ("deploy",),
    ("running", "search", "nightly"),
    ("report",),
    ("facts",),
    ("sweep",),
    ("engines",),
    ("stats",),
    (
        "objectives",
        "tquantiles",
        "files",
        "redact",
        "cache",
        "forks",
        "hostorder",
        "workloads",
        "deployments",
    ),
    ("metrics",),
)


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


def layer_of(module: str, layers: Sequence[Sequence[str]] = LAYERS) -> tuple[int, str] | None:
    """The line (0 at the top) and the package or top-level module of `layers` a module is part of."""
    part = module.split(".")[1] if module.count(".") else None
    return next(((i, part) for i, line in enumerate(layers) if part in line), None)


def upward(graph: Mapping[str, set[str]], layers: Sequence[Sequence[str]] = LAYERS) -> list[str]:
    """Every import of one part of analysis by another on its own line of `layers` or a line above."""
    found = []
    for name, targets in sorted(graph.items()):
        for target in sorted(targets):
            here, there = layer_of(name, layers), layer_of(target, layers)
            if here and there and here[1] != there[1] and there[0] <= here[0]:
                found.append(f"{name} imports {target}")
    return found


def test_the_layer_check_finds_an_import_up_or_sideways() -> None:
    graph = {  # the two arrows up of 19b8be3, one sideways, and two down
        "analysis.sweep.request": {"analysis.report.mix", "analysis.sweep.config"},
        "analysis.nightly.history": {"analysis.deploy.store", "analysis.report.sla"},
        "analysis.search.objective": {"analysis.nightly.judge"},
        "analysis.deploy.deployed": {"analysis.nightly.history"},
    }
    assert upward(graph) == [
        "analysis.nightly.history imports analysis.deploy.store",
        "analysis.search.objective imports analysis.nightly.judge",
        "analysis.sweep.request imports analysis.report.mix",
    ]


def test_every_part_of_analysis_is_on_one_line_of_the_layers() -> None:
    parts = [part for line in LAYERS for part in line]
    assert len(parts) == len(set(parts)), parts
    stray = sorted(name for name in import_graph() if name != "analysis" and layer_of(name) is None)
    assert stray == [], f"add these to LAYERS (and docs/design.md): {stray}"


def test_no_import_runs_back_up_the_layers() -> None:
    assert upward(import_graph()) == []


def test_design_md_lists_the_layers_as_checked() -> None:
    text = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    block = text[text.index("Imports run one way") :].split("\n\n")[1]
    listed = tuple(tuple(re.findall(r"`([a-z_]+)`", line)) for line in block.splitlines())
    assert listed == LAYERS, listed
