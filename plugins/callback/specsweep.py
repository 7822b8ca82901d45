"""Ansible's default output, plus readable progress while a server loads or is measured."""

from __future__ import annotations

from ansible.plugins.callback.default import CallbackModule as DefaultCallback

DOCUMENTATION = r"""
name: specsweep
type: stdout
short_description: default output, with loading and benchmark progress instead of "FAILED - RETRYING"
description:
  - A long server load (10-15 minutes for a large SGLang model) is a series of wait attempts.
    Each attempt that ends still loading is shown as one progress line with the elapsed time
    and the loading phase read from the server log.
  - A benchmark is a series of attempts too; each that ends with the client still running is
    shown with the repeat it is on (the client's last line on stderr).
extends_documentation_fragment:
  - default_callback
  - result_format_callback
requirements:
  - set as stdout_callback in ansible.cfg
"""


class CallbackModule(DefaultCallback):
    """The default stdout callback with a progress line for the wait and benchmark attempts."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "specsweep"

    def v2_runner_retry(self, result) -> None:
        data = result.result
        if "elapsed_s" not in data or data.get("ready") or data.get("done"):
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
