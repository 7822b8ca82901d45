"""Rules live in tested Python, not in Jinja: no Jinja expression in the Ansible YAML is over 80 chars.

An expression that long holds a rule (a condition of five clauses, an argv built from pieces, a
dict zipped from lookups) that no unit test sees; it belongs in a filter, an action or the plan, or
it is data and text that read better as named vars. Both kinds of expression count: `{{ ... }}` in
any value, and the bare conditions Ansible templates itself (`when`, `until`, `that`, ...); and in
the roles' templates, `{{ ... }}` and `{% ... %}` alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from plugin_loader import REPO

LIMIT = 80
EXPRESSION = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)
CONDITIONS = {"when", "until", "that", "changed_when", "failed_when"}  # keys whose values are bare Jinja


def ansible_yaml() -> list[Path]:
    """The playbooks, roles, group and inventory vars, the playbooks at the root, the roles' templates."""
    folders = ("playbooks", "roles", "group_vars", "inventory")
    yaml_files = [*REPO.glob("*.yml"), *(p for f in folders for p in (REPO / f).rglob("*.yml"))]
    return sorted([*yaml_files, *REPO.glob("roles/*/templates/*.j2")])


def bare_conditions(node: Any) -> Iterator[str]:
    """Every condition under a CONDITIONS key (one string, or a list of them) in parsed YAML."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in CONDITIONS:
                yield from (v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str))
            yield from bare_conditions(value)
    elif isinstance(node, list):
        for item in node:
            yield from bare_conditions(item)


def long_expressions(paths: list[Path]) -> list[str]:
    """`file: expression` for each Jinja expression over LIMIT chars (whitespace folded) in `paths`."""
    found = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        braced = [match.group(0) for match in EXPRESSION.finditer(text)]
        bare = bare_conditions(yaml.safe_load(text)) if path.suffix == ".yml" else ()
        for expression in [*braced, *bare]:
            folded = " ".join(expression.split())
            if len(folded) > LIMIT:
                where = path.relative_to(REPO) if path.is_relative_to(REPO) else path.name
                found.append(f"{where}: {folded}")
    return found


def test_no_jinja_expression_is_over_80_chars() -> None:
    found = long_expressions(ansible_yaml())
    assert found == [], (
        "move the rule into a filter, an action or the plan (and test it there), or name its parts"
    )


def test_the_scan_sees_long_expressions_across_lines_and_in_bare_conditions(tmp_path: Path) -> None:
    clause = "a_long_variable_name | default(false)"
    play = tmp_path / "play.yml"
    play.write_text(
        f"""\
- name: x
  vars:
    y: >-
      {{{{ {clause}
         | {clause} }}}}
  when: {clause} and {clause} and z
  tasks:
    - ansible.builtin.assert:
        that: [short, {clause} or {clause} or z]
"""
    )
    found = [line.split(": ", 1)[1] for line in long_expressions([play])]
    assert found == [
        f"{{{{ {clause} | {clause} }}}}",
        f"{clause} and {clause} and z",
        f"{clause} or {clause} or z",
    ], found
    assert REPO / "sweep.yml" in ansible_yaml() and REPO / "roles/deploy/tasks/rollout.yml" in ansible_yaml()
    assert REPO / "roles/nightly_schedule/templates/nightly.service.j2" in ansible_yaml()


def test_the_scan_sees_long_expressions_and_statements_in_templates(tmp_path: Path) -> None:
    unit = tmp_path / "x.service.j2"
    clause = "a_long_variable_name + another_long_variable_name + [a_third_variable]"
    statement, expression = f"{{% set argv = {clause} %}}", f"{{{{ ({clause}) | join(' ') }}}}"
    unit.write_text(f"{statement}\nExecStart={expression}\n")
    assert [line.split(": ", 1)[1] for line in long_expressions([unit])] == [statement, expression]
