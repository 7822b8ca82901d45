"""A host's lease while it only waits, on the controller, for another host's claim or probe.

Every call the run makes on a host renews the run's lease there (its lock file's mtime), and a
host whose controller has gone quiet for `lease_s` stops the run's servers and frees itself (see
specsweep_supervisor). A host polling the claims on the controller makes no such call, and may wait
longer than the lease for a slower host's config (a GPU model loads for 10-15 min); these say when
such a poll renews the lease, and how.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from analysis.sweep import hostplan

# When each waiting poll last renewed its host's lease. A task's retries run in one worker process,
# where this lives; a new task starts afresh.
_RENEWED: dict[str, float] = {}


def renewal_due(poll: str, lease_s: float, now: float | None = None) -> bool:
    """Whether the waiting `poll` (its host and task) renews the lease now: at its first wait, then
    every third of the lease, so that a late or failed renewal still leaves time for another."""
    now = time.monotonic() if now is None else now
    last = _RENEWED.get(poll)
    if last is not None and now - last < lease_s / 3:
        return False
    _RENEWED[poll] = now
    return True


def renewal(task_vars: dict[str, Any]) -> dict[str, Any]:
    """The specsweep_lock module's arguments that renew this host's lease for this run."""
    plan = task_vars["specsweep_plan"]
    host = hostplan.of(plan, task_vars["inventory_hostname"])
    return {"state": "renewed", "path": host.lock_path, "owner": plan["owner"]}


def keep_while_waiting(
    task_vars: dict[str, Any], task: str, execute_module: Callable[..., dict[str, Any]]
) -> str | None:
    """Renew the host's lease when due for the waiting `task` (its id), through an action plugin's
    `_execute_module` (the specsweep_lock module, on the host). Returns why the run no longer holds
    the host, or None."""
    poll = f"{task_vars['inventory_hostname']}/{task}"
    if not renewal_due(poll, task_vars["specsweep_plan"]["sweep"]["settings"]["lease_s"]):
        return None
    args = renewal(task_vars)
    found = execute_module("specsweep_lock", module_args=args, task_vars=task_vars)
    if found.get("failed") or not found.get("renewed"):
        why = found.get("msg") or "the lock is gone or another run holds it"
        return f"lost this host while waiting: {args['path']}: {why}"
    return None
