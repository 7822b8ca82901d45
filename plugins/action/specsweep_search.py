"""Ask the step search (analysis.search, on the controller) which config this host measures next.

Returns the answer as data: `action` (measure / wait / done), the `entry` to measure (config,
argv, env: this host's own, from the plan) and why. Stateless: the facts on disk and the claim
folders are the search's whole state, so hosts ask at any time and a resumed run asks again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

# The suite's own Python (installed in the venv by scripts/setup.sh).
from analysis import objectives
from analysis.report.sla import Sla
from analysis.search.state import Asker, Candidate, InputError, next_step
from analysis.sweep import hostplan, lease
from analysis.sweep.config import DEFAULT_PROFILE


class ActionModule(ActionBase):
    """where: the host's results (dir, run_id, host); profile: the env profile searched."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("where", "profile"))

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        assert task_vars is not None
        where, profile = self._task.args["where"], self._task.args["profile"]
        plan = task_vars["specsweep_plan"]
        shard = plan["sweep"]["settings"]["mode"] == "shard"
        entries = {
            e.config.id: e
            for e in hostplan.of(plan, where["host"]).entries
            if e.searched and e.config.env_profile == profile
        }
        candidates = [Candidate(cid, e.config.steps) for cid, e in entries.items()]
        # Hosts of the run that left it (unreachable, failed): their probes are taken over.
        lost = frozenset(plan["sweep"]["hosts"]) - set(task_vars["ansible_play_hosts"])
        settings = plan["sweep"]["settings"]
        sla = Sla(settings.get("sla_ttft_p99_ms"), settings.get("sla_itl_p99_ms"))
        try:
            asker = Asker(
                Path(where["dir"]), where["host"], where["run_id"], "all" if shard else "host",
                "" if profile == DEFAULT_PROFILE else profile, lost, settings["mix"],
                objectives.get(settings.get("objective")), sla,
            )  # fmt: skip
        except InputError as exc:
            raise AnsibleActionFail(f"step search: {exc}") from exc
        parallel = len(plan["sweep"]["hosts"]) - len(lost) if shard else 1
        levels = plan["sweep"]["settings"]["concurrency"]
        try:
            answer = next_step(asker, candidates, max(parallel, 1), None, levels)
        except InputError as exc:
            raise AnsibleActionFail(f"step search: {exc}") from exc
        # A host waiting for another host's probe keeps its lease (analysis.sweep.lease).
        waiting = answer["action"] == "wait"
        if waiting and (lost := lease.keep_while_waiting(task_vars, self._task._uuid, self._execute_module)):
            raise AnsibleActionFail(lost)
        best = answer.get("best")
        best = ", ".join(f"{b} at c{c}" for c, b in best.items()) if isinstance(best, dict) else best
        what = " ".join(filter(None, [answer["action"], answer.get("config_id") or best]))
        say = f"search: {what}: {answer['reason']}"
        chosen = entries.get(answer.get("config_id", ""))
        return {
            **result,
            "changed": answer["action"] == "measure",  # a claim, on the controller
            **answer,
            "entry": chosen and hostplan.dump(chosen),
            "specsweep_say": say,
        }
