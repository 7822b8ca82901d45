"""Every host module's DOCUMENTATION, EXAMPLES and RETURN parse as YAML: ansible-doc and ansible-lint
read them, and a stray ': ' in a description breaks both (found once in specsweep_job and _wait)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

MODULES = sorted((Path(__file__).resolve().parents[2] / "plugins" / "modules").glob("*.py"))


def doc_strings(path: Path) -> dict[str, str]:
    """The module's documentation constants, by name."""
    tree = ast.parse(path.read_text())
    return {
        node.targets[0].id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id in ("DOCUMENTATION", "EXAMPLES", "RETURN")
        and isinstance(node.value, ast.Constant)
    }


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_a_modules_documentation_is_yaml_ansible_doc_can_read(path: Path) -> None:
    docs = doc_strings(path)
    assert "DOCUMENTATION" in docs, path
    for name, text in docs.items():
        assert isinstance(yaml.safe_load(text), (dict, list, type(None))), (path.name, name)
    assert yaml.safe_load(docs["DOCUMENTATION"])["module"] == path.stem
