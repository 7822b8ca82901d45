"""Judge one host's short benchmark after its restart (analysis.deploy.gate) and, when it passes,
record the deployment in the history store (analysis.deployments). On the controller.

Fails with the gate's name and figures when it does not pass; the caller rolls the host back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.plugins.action import ActionBase

# The suite's own Python (installed in the venv by scripts/setup.sh).
from analysis import deployments
from analysis.deploy import gate
from analysis.nightly.history import HistoryError, connect


class ActionModule(ActionBase):
    """target: the plan's entry for this host; bench: the benchmark role's result; history: the store."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = False  # nothing was measured
    _VALID_ARGS = frozenset(("target", "bench", "tolerance_pct", "history", "launcher"))

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        assert task_vars is not None
        args = self._task.args
        target = args["target"]
        tolerance = args.get("tolerance_pct")
        verdict = gate.judge(
            target["sweep"],
            args.get("bench") or {},
            None if tolerance in (None, "") else float(tolerance),
            target.get("mix"),
        )
        figures = verdict.as_dict()
        if not verdict.passed:
            return {**result, "failed": True, "msg": verdict.detail, "verdict": figures}
        host = task_vars["inventory_hostname"]
        try:
            conn = connect(Path(args["history"]))
        except HistoryError as exc:
            return {**result, "failed": True, "msg": f"the gate passed but it cannot be recorded: {exc}"}
        try:
            deployments.record(conn, deployments.row(host, target, figures, str(args.get("launcher") or "")))
        finally:
            conn.close()
        say = f"gates passed: {verdict.detail}; {target['config']} recorded in {args['history']}"
        return {**result, "changed": True, "verdict": figures, "specsweep_say": say}
