"""Take a host's sweep lock for this run, taking over from a run that is gone (the module does the host side).

The module creates, checks or releases the lock file on the host; whether the run holding it is
still alive can only be told here, on the controller that may have started it (its
ansible-playbook process), or from the lease the holder stopped renewing (the module reports how
long ago the lock file was last touched).
"""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

# The suite's own Python (installed in the venv by scripts/setup.sh).
from analysis.sweep import identity


class ActionModule(ActionBase):
    """The specsweep_lock module's arguments; `acquired` also steals from a dead holder, once, and
    says why when it took nothing (another run holds the host, or a process holds the engine's port)."""

    TRANSFERS_FILES = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        found = self._execute_module("specsweep_lock", module_args=args, task_vars=task_vars)
        holder = found.get("holder") or {}
        refused = args.get("state") == "acquired" and not found.get("acquired", True)
        gone = refused and holder and identity.holder_gone(holder, found.get("holder_age_s"))
        if gone and "port_holder" not in found:
            found = self._execute_module(
                "specsweep_lock",
                module_args={**args, "steal_from": holder.get("run_id")},
                task_vars=task_vars,
            )
        if refused and not found.get("acquired", True):
            host = (task_vars or {}).get("inventory_hostname", "this host")
            holder = found.get("holder") or holder
            if found.get("port_holder"):
                found["refusal"] = identity.port_refusal(host, found["port_holder"], holder)
            else:
                found["refusal"] = identity.refusal(host, holder, args["path"])
        return {**result, **found}
