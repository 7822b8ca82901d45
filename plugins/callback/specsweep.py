"""Output for people: one line per step of a sweep and the table; Ansible's full output at -v."""

from __future__ import annotations

from ansible import constants as C
from ansible.playbook.block import Block
from ansible.plugins.callback.default import CallbackModule as DefaultCallback

# The suite's own Python (installed in the venv by scripts/setup.sh).
from analysis.deploy import rollout

DOCUMENTATION = r"""
name: specsweep
type: stdout
short_description: the sweep's own lines (plan, configs, progress, failures, table); all of Ansible's at -v
description:
  - At the default verbosity, prints what the sweep's tasks say (a result's C(specsweep_say)), the
    loading and benchmark progress of long waits, failures that end a host or a run, and the recap.
    Task and play banners, skipped tasks and failures a block rescues (a config's failure is printed
    as its recorded line instead) are left out.
  - With -v or more, Ansible's default output, with the same progress lines.
  - A deploy (deploy.yml) that stopped before it reached every host ends with a line naming the
    hosts left on their old config and why it stopped (the canary unreachable or failed).
extends_documentation_fragment:
  - default_callback
  - result_format_callback
requirements:
  - set as stdout_callback in ansible.cfg
"""


def rescued(task) -> bool:
    """Whether a failure of `task` is caught by the rescue of a block around it.

    Tasks are copied as they run, so a block's own list is compared by uuid, not identity.
    """
    child, node = task, task._parent
    while node is not None:
        if isinstance(node, Block) and node.rescue and any(t._uuid == child._uuid for t in node.block):
            return True
        child, node = node, node._parent
    return False


class CallbackModule(DefaultCallback):
    """The default stdout callback, quiet but for the sweep's own lines unless -v."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "specsweep"

    @property
    def _quiet(self) -> bool:
        return self._display.verbosity < 1

    def _say(self, result) -> None:
        """The line a task has for people; a run_once task's is the run's, not a host's."""
        text = result._result.get("specsweep_say")
        if text:
            prefix = "" if result._task.run_once else f"[{self.host_label(result)}] "
            self._display.display(prefix + text.replace("\n", "\n" + " " * len(prefix)) if prefix else text)

    # Banners and results: only the sweep's own lines unless -v.
    def v2_playbook_on_play_start(self, play) -> None:
        if self._quiet:
            self._play = play
        else:
            super().v2_playbook_on_play_start(play)

    def v2_playbook_on_task_start(self, task, is_conditional) -> None:
        if not self._quiet:
            super().v2_playbook_on_task_start(task, is_conditional)

    def v2_playbook_on_handler_task_start(self, task) -> None:
        if not self._quiet:
            super().v2_playbook_on_handler_task_start(task)

    def v2_playbook_on_include(self, included_file) -> None:
        if not self._quiet:
            super().v2_playbook_on_include(included_file)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # A deploy's hosts (its plan's targets and canary) and the hosts any other task started on.
        self._deploy: dict | None = None
        self._started: set[str] = set()

    def v2_runner_on_start(self, host, task) -> None:
        super().v2_runner_on_start(host, task)
        if not task.action.endswith("specsweep_deploy_plan"):
            self._started.add(host.get_name())

    def v2_playbook_on_stats(self, stats) -> None:
        super().v2_playbook_on_stats(stats)
        if self._deploy is None:
            return
        ended = {}
        for host in self._deploy["targets"]:
            summary = stats.summarize(host)
            if summary["unreachable"] or summary["failures"]:
                ended[host] = "was unreachable" if summary["unreachable"] else "failed"
        said = rollout.untouched(list(self._deploy["targets"]), self._started, self._deploy["canary"], ended)
        if said:
            self._display.display(said, color=C.COLOR_ERROR, stderr=True)

    def v2_runner_on_ok(self, result) -> None:
        if result._task.action.endswith("specsweep_deploy_plan") and not result._task.check_mode:
            self._deploy = {"targets": result._result["targets"], "canary": result._result["canary"]}
        if not self._quiet:
            super().v2_runner_on_ok(result)
        elif result._task.action in C._ACTION_DEBUG and "msg" in result._result:
            self._display.display(str(result._result["msg"]))  # a debug task is there to be read
        else:
            self._say(result)

    def v2_runner_item_on_ok(self, result) -> None:
        if not self._quiet:
            super().v2_runner_item_on_ok(result)

    def v2_runner_on_skipped(self, result) -> None:
        if not self._quiet:
            super().v2_runner_on_skipped(result)

    def v2_runner_item_on_skipped(self, result) -> None:
        if not self._quiet:
            super().v2_runner_item_on_skipped(result)

    def v2_runner_on_failed(self, result, ignore_errors=False) -> None:
        if not self._quiet:
            super().v2_runner_on_failed(result, ignore_errors)
        elif not ignore_errors and not rescued(result._task):
            self._say(result)  # a report that fails still prints its table first
            msg = result._result.get("msg") or "failed"
            self._display.display(
                f"[{self.host_label(result)}] FAILED: {msg}", color=C.COLOR_ERROR, stderr=True
            )

    def v2_runner_item_on_failed(self, result) -> None:
        if not self._quiet:
            super().v2_runner_item_on_failed(result)

    def v2_runner_on_unreachable(self, result) -> None:
        if not self._quiet:
            super().v2_runner_on_unreachable(result)
        else:
            msg = result._result.get("msg") or "unreachable"
            self._display.display(
                f"[{self.host_label(result)}] UNREACHABLE: {msg}", color=C.COLOR_UNREACHABLE
            )

    def v2_runner_retry(self, result) -> None:
        """A wait or benchmark slice: where the server or the client is, instead of "FAILED - RETRYING"."""
        data = result._result
        if "elapsed_s" not in data or data.get("ready") or data.get("done"):
            if not self._quiet:
                super().v2_runner_retry(result)
        elif "progress" in data:  # a benchmark slice (specsweep_job)
            self._display.display(
                f"[{self.host_label(result)}] benchmarking ({data['progress'] or 'starting'}), "
                f"{data['elapsed_s']:.0f} s elapsed"
            )
        else:  # a wait_for_health slice (specsweep_wait)
            self._display.display(
                f"[{self.host_label(result)}] still loading ({data.get('phase', 'starting')}), "
                f"{data['elapsed_s']:.0f} s elapsed; {data.get('last', '')}"
            )
