"""The YAML reads documented fields of the plan only (analysis.sweep.hostplan).

Every `specsweep_host.<field>` (and `specsweep_entry`, `specsweep_slot`, `specsweep_server`, the
parts of it the playbooks name), and every `specsweep_sweep.<field>` / `specsweep_plan.sweep.<field>`
and `specsweep_settings.<setting>` (the sweep and its settings) in playbooks/, roles/ and plugins/,
down its dotted path and through
`selectattr('x')` / `map(attribute='x')`, must be a field of its struct: a misspelt one would
otherwise be an undefined variable on the host, mid-sweep, or a silent `default(...)`.
"""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any

import msgspec
import pytest
from plugin_loader import REPO

from analysis.sweep.hostplan import Entry, HostPlan, Server, Settings, Slot, Sweep

ROOTS: dict[str, Any] = {
    "specsweep_host": HostPlan,
    "specsweep_entry": Entry,
    "specsweep_slot": Slot,
    "specsweep_server": Server,
    "specsweep_sweep": Sweep,
    "specsweep_plan.sweep": Sweep,
    "specsweep_settings": Settings,
}
# A root name (not a longer one: specsweep_host_facts), then .field / ['field'] steps.
REFERENCE = re.compile(
    r"\b(?P<root>"
    + "|".join(map(re.escape, ROOTS))
    + r")(?P<path>(?:\.[A-Za-z_]\w*|\[\s*['\"][^'\"]+['\"]\s*\])+)"
)
STEP = re.compile(r"\.([A-Za-z_]\w*)|\[\s*['\"]([^'\"]+)['\"]\s*\]")
# Filters over a list of structs that name a field of its items.
ITEM_FILTER = re.compile(
    r"\s*\|\s*(?:(?:selectattr|rejectattr)\(\s*['\"](?P<a>[\w.]+)['\"]|map\(\s*attribute=['\"](?P<m>[\w.]+)['\"])"
    r"[^)]*\)"
)


def _struct(tp: Any) -> Any:
    """The struct a field's type holds (Server | None -> Server); other types as they are."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        parts = [a for a in typing.get_args(tp) if a is not type(None)]
        return parts[0] if len(parts) == 1 else tp
    return tp


def _is_struct(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, msgspec.Struct)


def _walk(tp: Any, fields: list[str], where: str) -> tuple[list[str], Any]:
    """Why a step of `fields` is no field of `tp` (none: they all are), and the type it ends at."""
    for i, name in enumerate(fields):
        tp = _struct(tp)
        if not _is_struct(tp):
            return [], None  # a dict (env), a str: no fields to check
        known = {f.name: f.type for f in msgspec.structs.fields(tp)}
        if name not in known:
            return [f"{where}: {'.'.join(fields[: i + 1])}: {tp.__name__} has no field {name!r}"], None
        tp = known[name]
    return [], tp


def problems(text: str, where: str) -> list[str]:
    """Every reference in `text` to a field its struct does not define."""
    found = []
    for ref in REFERENCE.finditer(text):
        fields = [a or b for a, b in STEP.findall(ref["path"])]
        said, tp = _walk(ROOTS[ref["root"]], fields, f"{where}: {ref['root']}")
        found += said
        # `| selectattr('x')` / `| map(attribute='x.y')` right after a list of structs: their fields.
        item = typing.get_args(tp)[0] if typing.get_origin(tp) is list else None
        rest = ref.end()
        while item is not None and (step := ITEM_FILTER.match(text, rest)):
            label = f"{where}: {ref['root']}.{'.'.join(fields)} items"
            found += _walk(item, (step["a"] or step["m"]).split("."), label)[0]
            rest = step.end()
    return found


def sources() -> list[Path]:
    """The YAML, templates and plugins that hosts' tasks and the controller's actions are made of."""
    return sorted(
        p
        for d in ("playbooks", "roles", "plugins")
        for p in (REPO / d).rglob("*")
        if p.suffix in (".yml", ".yaml", ".j2", ".py")
    )


def test_every_plan_field_the_yaml_reads_is_one_the_structs_define() -> None:
    found = [p for path in sources() for p in problems(path.read_text(encoding="utf-8"), path.name)]
    assert found == [], "add the field to analysis/sweep/hostplan.py (documented), or fix its spelling"


def test_the_scan_sees_the_references_there_are() -> None:
    refs = [r for path in sources() for r in REFERENCE.finditer(path.read_text(encoding="utf-8"))]
    # measure.yml alone reads specsweep_entry.config.id in a dozen task names.
    assert len(refs) > 60, len(refs)
    assert not any(r["root"] == "specsweep_host" and r["path"].startswith("_") for r in refs)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "path: '{{ specsweep_host.lock_pth }}'",
            "specsweep_host: lock_pth: HostPlan has no field 'lock_pth'",
        ),
        ("{{ specsweep_entry.config.stpes }}", "specsweep_entry: config.stpes: Config has no field 'stpes'"),
        ("{{ specsweep_host['ordr'] | length }}", "specsweep_host: ordr: HostPlan has no field 'ordr'"),
        ("{{ specsweep_host.server.prot }}", "specsweep_host: server.prot: Server has no field 'prot'"),
        ("{{ specsweep_slot.entri }}", "specsweep_slot: entri: Slot has no field 'entri'"),
        (
            "{{ specsweep_settings.concurency }}",
            "specsweep_settings: concurency: Settings has no field 'concurency'",
        ),
        ("{{ specsweep_sweep.run }}", "specsweep_sweep: run: Sweep has no field 'run'"),
        (
            "when: not specsweep_plan.sweep.settings.plan_onyl",
            "specsweep_plan.sweep: settings.plan_onyl: Settings has no field 'plan_onyl'",
        ),
        (
            "{{ specsweep_sweep.workloads.record }}",
            "specsweep_sweep: workloads.record: Workloads has no field 'record'",
        ),
        (
            "{{ specsweep_host.entries | selectattr('searched') | map(attribute='config.env_profil') }}",
            "specsweep_host.entries items: config.env_profil: Config has no field 'env_profil'",
        ),
    ],
)
def test_a_misspelt_field_is_named(text: str, said: str) -> None:
    assert problems(text, "t.yml") == [f"t.yml: {said}"]


def test_documented_fields_and_other_variables_pass() -> None:
    text = """
      - "{{ specsweep_host.entries[specsweep_slot.entry] }}"
      - "{{ specsweep_host.adaptive_config.dest }}"
      - "{{ specsweep_entry.env.NCCL_ALGO | default('') }}"
      - "{{ specsweep_host_facts.hostname }}"
      - "{{ specsweep_host.order | selectattr('speculative') | map(attribute='name') }}"
      - "{{ specsweep_settings.concurrency | max }} {{ specsweep_sweep.workloads.records }}"
      - "{{ specsweep_plan.sweep.settings.plan_only }} {{ specsweep_plan.owner }}"
    """
    assert problems(text, "t.yml") == []
