"""The end of a sweep, on the controller (run_once): the step-count table from the facts on disk,
what each step search found, and the verdict: failed configs and hosts that did not finish.

Runs `python -m analysis report` in this process (a module round trip and a fresh interpreter cost
more than the table). Hosts' states come from what their tasks registered, which stays after a
host failed or became unreachable.
"""

from __future__ import annotations

import contextlib
import io
import time
from pathlib import Path
from typing import Any

from ansible.plugins.action import ActionBase

# The suite's own Python (installed in the venv by scripts/setup.sh).
from analysis import cli
from analysis.running import progress, race
from analysis.search.state import render_summary
from analysis.sweep import estimate, hostplan, request


class ActionModule(ActionBase):
    """fail_on_failure: false leaves the verdict to the caller (the nightly)."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = False  # nothing was measured
    _VALID_ARGS = frozenset(("fail_on_failure",))

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        if result.get("skipped"):
            return result
        assert task_vars is not None
        plan = task_vars["specsweep_plan"]
        sweep = plan["sweep"]
        root = Path(sweep["dir"])
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            cli.main(["report", sweep["dir"], *request.ranking_options(sweep["settings"])])
        parts = [out.getvalue().rstrip() or err.getvalue().rstrip(), render_summary(root)]
        closing = {h: [s["name"] for s in p.get("closing") or []] for h, p in plan["hosts"].items()}
        launches = int(sweep["settings"].get("launches", 1))
        parts.append(race.relaunched(root, sweep["hosts"], launches, closing))
        parts.append(race.saved(root, sweep["hosts"]))
        hostvars = task_vars["hostvars"]
        states = {h: progress.host_state(hostvars[h]) for h in sweep["hosts"]}
        failures = progress.failed_configs(root, sweep["hosts"])
        lines = [f"{len(failures)} config(s) failed: {', '.join(failures)}; see {root}"] if failures else []
        if plan["phases"]["sweep"]:
            # Followers record no facts of their own: their leader's cover them.
            host_plans = {h: hostplan.of(plan, h) for h in sweep["hosts"]}
            leaders = [h for h in sweep["hosts"] if not host_plans[h].follows]
            planned = {h: [*host_plans[h].order, *host_plans[h].closing] for h in leaders}
            kept = {h: [k["name"] for k in hostvars[h].get("specsweep_kept") or []] for h in leaders}
            lines += progress.kept(sweep["id"], leaders, hostvars)
            lines += progress.dropped(sweep["id"], leaders, hostvars)
            lines += progress.unmeasured(
                root, leaders, sweep["configs"], sweep["settings"], states, planned, kept
            )
            parts.append(estimate.versus(sweep, root, time.time()))
        else:
            # `--tags report` of an earlier sweep shows it; only a run that measured is judged.
            parts += [f"earlier runs: {line}" for line in lines]
            lines = []
        say = "\n\n".join(p for p in parts if p)
        failed = bool(lines) and bool(self._task.args.get("fail_on_failure", True))
        return {
            **result,
            "changed": False,
            "failures": lines,
            "states": states,
            "specsweep_say": say,
            "failed": failed,
            **({"msg": "\n".join(lines)} if failed else {}),
        }
