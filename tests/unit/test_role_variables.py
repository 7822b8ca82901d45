"""Each engine role owns its variables: what its tasks use, or what the plan reads, said as such."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from analysis.engines import ENGINES

ROOT = Path(__file__).resolve().parents[2]
PLAN_READ = "Read by the plan on the controller (analysis/engines/), not by this role's tasks."


def _role_text(role: str) -> str:
    """What the role's own tasks, templates and handlers say (where a variable would be used)."""
    files = [p for d in ("tasks", "templates", "handlers") for p in (ROOT / "roles" / role).glob(f"{d}/**/*")]
    return "".join(p.read_text() for p in files if p.is_file())


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_every_engine_role_variable_is_used_by_its_tasks_or_marked_as_the_plans(engine: str) -> None:
    role = ENGINES[engine].role
    spec = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"]["options"]
    used = _role_text(role)
    wrong = []
    for name, option in options.items():
        marked = option["description"][0] == PLAN_READ
        plan_reads = name.removeprefix(f"{role}_") in ENGINES[engine].settings
        if marked != (plan_reads and name not in used):
            wrong.append(name)
        if not marked and name not in used:
            wrong.append(f"{name} (read by nothing)")
    assert not wrong
