"""Write into the sweep's results folder, in the ansible-playbook process on the controller.

An action plugin, not a command: the fact of each config is written between two configs, and a
module round trip there (fork, AnsiballZ, a fresh Python) costs more than the write itself.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

# The schema's one writer (the repo is installed in the venv: scripts/setup.sh).
from analysis.facts import record

ACTIONS = ("fact", "plan", "claim")


def plain(value: Any) -> Any:
    """Ansible's templated values as plain JSON types (the schema checks exact types)."""
    return json.loads(json.dumps(value))


class ActionModule(ActionBase):
    """fact: one (host, config) fact; plan: sweep.json + plan.json; claim: a shard config for a host."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset((*ACTIONS, "path"))

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self._task.args
        given = [a for a in ACTIONS if a in args]
        if len(given) != 1 or not args.get("path"):
            raise AnsibleActionFail(f"specsweep_results needs path and exactly one of {', '.join(ACTIONS)}")
        path = Path(str(args["path"]))
        if self._task.check_mode:
            return {**result, "changed": True, "path": str(path)}
        if given[0] == "fact":
            try:
                fact = record.write_fact(plain(args["fact"]), path)
            except (KeyError, TypeError, ValueError) as exc:
                raise AnsibleActionFail(f"{path}: not a valid fact: {exc}") from exc
            return {**result, "changed": True, "path": str(path), "status": fact.status}
        if given[0] == "plan":
            text = record.write_plan(plain(args["plan"]), path)
            return {**result, "changed": True, "path": str(path), "msg": text}
        # Shard mode: mkdir is atomic, so exactly one host claims each config.
        try:
            os.makedirs(path.parent, exist_ok=True)
            os.mkdir(path)
        except FileExistsError:
            return {**result, "changed": False, "path": str(path), "claimed": False}
        return {**result, "changed": True, "path": str(path), "claimed": True}
