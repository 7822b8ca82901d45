"""Run an analysis command (`python -m analysis ...`, `python -m analysis.search ...`) in the
ansible-playbook process, with the result shape of ansible.builtin.command.

The sweep asks analysis between configs (the step search) and at its end (the table): a module
round trip plus a fresh interpreter there costs more than the answer.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import sys
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

# What argv[0] may name, and the module whose main(argv) it runs.
ENTRY_POINTS = {"analysis": "analysis.cli"}


class ActionModule(ActionBase):
    """argv: [analysis|analysis.search, subcommand, ...]; stdin: text for the command's stdin."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("argv", "stdin"))

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)  # skips the task in check mode, like command
        argv = [str(a) for a in self._task.args.get("argv") or []]
        if not argv or argv[0] not in ENTRY_POINTS:
            raise AnsibleActionFail(f"argv must start with one of {', '.join(ENTRY_POINTS)}")
        main = importlib.import_module(ENTRY_POINTS[argv[0]]).main
        out, err = io.StringIO(), io.StringIO()
        stdin = io.StringIO(str(self._task.args.get("stdin") or ""))
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            saved, sys.stdin = sys.stdin, stdin
            try:
                rc = int(main(argv[1:]))
            except SystemExit as exc:  # argparse's usage errors
                rc = exc.code if isinstance(exc.code, int) else 2
            finally:
                sys.stdin = saved
        stdout, stderr = out.getvalue().rstrip("\n"), err.getvalue().rstrip("\n")
        return {
            **result,
            "rc": rc,
            "failed": rc != 0,
            "changed": False,
            "cmd": ["python", "-m", *argv],
            "stdout": stdout,
            "stdout_lines": stdout.splitlines(),
            "stderr": stderr,
            "stderr_lines": stderr.splitlines(),
            **({"msg": "non-zero return code"} if rc else {}),
        }
