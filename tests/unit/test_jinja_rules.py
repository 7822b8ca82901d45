"""Rules live in tested Python, not in Jinja: no `{{ ... }}` in playbooks/ or roles/ over 80 chars.

An expression that long holds a rule (a condition of five clauses, an argv built from pieces, a
dict zipped from lookups) that no unit test sees; it belongs in a filter, an action or the plan.
KNOWN lists the ones still there, each with why it is there: it may only shrink (a new long
expression fails, and so does an entry whose expression is gone).
"""

from __future__ import annotations

import re

from plugin_loader import REPO

LIMIT = 80
EXPRESSION = re.compile(r"\{\{.*?\}\}", re.S)
DATA = "pure data: a lookup or a filter call, no rule"
TEXT = "a message's wording"
# (file, the expression's first 48 characters, whitespace folded): why it is still here.
KNOWN = {
    ("playbooks/nightly.yml", "{{ specsweep_nightly | default({}) | specsweep_n"): DATA,
    ("playbooks/nightly.yml", "{{ nightly_history | default(none) | specsweep_d"): DATA,
    (
        "playbooks/nightly.yml",
        "{{ (specsweep_report.failures | default([]) + [s",
    ): TEXT,
    ("playbooks/release.yml", "{{ lookup('ansible.builtin.file', specsweep_rele"): DATA,
    ("roles/deploy/tasks/main.yml", "{{ (deploy_now_raw.content | b64decode | from_js"): DATA,
    (
        "roles/deploy/tasks/rollout.yml",
        "{{ 'already serving' if deploy_same else ('would",
    ): TEXT,
    ("roles/deploy/tasks/rollout.yml", "{{ ansible_failed_result.verdict.gate | default("): DATA,
    (
        "roles/deploy/tasks/rollout.yml",
        "{{ ansible_failed_result.msg | default('failed')",
    ): TEXT,
    (
        "roles/deploy/tasks/rollout.yml",
        "{{ (deploy_before.config ~ ' of sweep ' ~ deploy",
    ): TEXT,
    ("roles/deploy/tasks/settle.yml", "{{ (deploy_settle_raw.content | b64decode | from"): DATA,
    ("roles/llama_server/tasks/main.yml", "{{ (llama_server_model_check.model_identity | de"): DATA,
    ("roles/llama_server/tasks/main.yml", "{{ llama_server_model_check.problems | default(l"): DATA,
}


def long_expressions() -> dict[tuple[str, str], str]:
    """Every Jinja expression over LIMIT chars (whitespace folded) in playbooks/ and roles/ YAML."""
    found = {}
    for path in sorted([*(REPO / "playbooks").rglob("*.yml"), *(REPO / "roles").rglob("*.yml")]):
        for match in EXPRESSION.finditer(path.read_text(encoding="utf-8")):
            folded = " ".join(match.group(0).split())
            if len(folded) > LIMIT:
                found[(str(path.relative_to(REPO)), folded[:48])] = folded
    return found


def test_no_new_jinja_expression_over_80_chars_holds_a_rule() -> None:
    new = {key: text for key, text in long_expressions().items() if key not in KNOWN}
    assert new == {}, "move the rule into a filter, an action or the plan (and test it there)"


def test_the_list_of_long_expressions_left_only_shrinks() -> None:
    gone = sorted(set(KNOWN) - set(long_expressions()))
    assert gone == [], "these are gone: take them off KNOWN"


def test_the_scan_sees_a_long_expression_across_lines() -> None:
    folded = " ".join(EXPRESSION.search("x: >-\n  {{ a\n     | b }}\n").group(0).split())
    assert folded == "{{ a | b }}", folded
    # A real one, written over two lines.
    assert ("playbooks/nightly.yml", "{{ specsweep_nightly | default({}) | specsweep_n") in long_expressions()
