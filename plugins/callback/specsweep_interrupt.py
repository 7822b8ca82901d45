"""An interrupted sweep gives its hosts back: Ctrl-C or SIGTERM stops the servers it launched and
releases its host locks (playbooks/release.yml), keeping every recorded fact."""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from ansible import context
from ansible.plugins.callback import CallbackBase

# The suite's own Python (installed in the venv by scripts/setup.sh).
from analysis.sweep import sweeplock

DOCUMENTATION = r"""
name: specsweep_interrupt
type: aggregate
short_description: on Ctrl-C or SIGTERM, stop the sweep's servers and release its host locks
description:
  - Ansible stops at once on Ctrl-C (SIGTERM kills it outright), leaving the servers and benchmark
    clients it started running on their hosts, and their host locks held. This plugin turns SIGTERM
    into the same interruption as Ctrl-C and, as ansible-playbook exits, runs playbooks/release.yml
    over the hosts of the interrupted sweep with the same inventory and connection options, for at
    most RELEASE_TIMEOUT_S seconds. Facts already recorded are on disk and stay.
  - As ansible-playbook exits, interrupted or not, the sweep's controller lock
    (results/.locks/<sweep_id>.lock) is removed when this run holds it.
  - A controller that dies without a signal it can catch (kill -9, power loss) is covered on each
    host by the lease its servers' supervisor watches. So that the lease runs out, each worker process
    forked from ansible-playbook is killed with it (PR_SET_PDEATHSIG); an orphaned worker would keep
    retrying its task (a benchmark followed in slices) and each retry would renew the lease.
  - An interrupted deploy (deploy.yml) runs playbooks/deploy_settle.yml over its hosts instead, for
    at most SETTLE_TIMEOUT_S seconds. A host whose change was in flight goes back to what last passed
    its gates there; each says whether it serves the old config or the new one.
requirements:
  - enabled in ansible.cfg (callbacks_enabled)
"""

REPO = Path(__file__).resolve().parents[2]
RELEASE = REPO / "playbooks" / "release.yml"
# Every host back within 60 s of the interruption: the release's stop grace (20 s in release.yml),
# SIGKILL's wait (10 s) and the playbook's start and connection.
RELEASE_TIMEOUT_S = 50
# An interrupted deploy (deploy.yml) puts hosts whose change was in flight back on what last passed
# there, each saying old or new (playbooks/deploy_settle.yml); a restart waits for the server's load.
SETTLE = REPO / "playbooks" / "deploy_settle.yml"
SETTLE_TIMEOUT_S = 600
# Command-line options that say how to reach the hosts, as ansible-playbook takes them.
CONNECTION_OPTIONS = {
    "remote_user": "--user",
    "private_key_file": "--private-key",
    "connection": "--connection",
    "timeout": "--timeout",
    "ssh_common_args": "--ssh-common-args",
    "ssh_extra_args": "--ssh-extra-args",
    "become_method": "--become-method",
    "become_user": "--become-user",
}


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> None:
    """Have the kernel SIGKILL this process when the one that forked it dies (Linux prctl)."""
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return  # not Linux: the host's lease still ends, after the worker's last retry
    if os.getppid() != parent:  # it died before the prctl took effect
        os._exit(137)


def release_argv(cli: Any, sweep: dict[str, Any], results_dir: str) -> list[str]:
    """playbooks/release.yml over the sweep's hosts, reached as this run reaches them."""
    extra = {"release": sweep["id"], "release_results_dir": results_dir}
    return playbook_argv(cli, RELEASE, sweep["hosts"], extra)


def settle_argv(cli: Any, deploy: dict[str, Any]) -> list[str]:
    """playbooks/deploy_settle.yml over an interrupted deploy's hosts, reached as this run reaches them."""
    return playbook_argv(cli, SETTLE, deploy["hosts"], {"deploy_settle_run": deploy["run_id"]})


def playbook_argv(cli: Any, playbook: Path, hosts: list[str], more: dict[str, str]) -> list[str]:
    """`playbook` over `hosts` with this run's inventory, connection options and -e values, and `more`."""
    argv = [str(Path(sys.argv[0]).resolve()), str(playbook)]
    for source in cli.get("inventory") or ():
        argv += ["--inventory", source]
    for key, flag in CONNECTION_OPTIONS.items():
        if cli.get(key) not in (None, ""):
            argv += [flag, str(cli[key])]
    argv += ["--become"] if cli.get("become") else []
    for vault in cli.get("vault_password_files") or ():
        argv += ["--vault-password-file", vault]
    # The run's own -e values may carry connection variables (ansible_user, ...).
    for extra in cli.get("extra_vars") or ():
        argv += ["--extra-vars", extra]
    for key, value in more.items():
        argv += ["--extra-vars", f"{key}={value}"]
    return [*argv, "--limit", ",".join(hosts)]


class CallbackModule(CallbackBase):
    """Remembers the plan of this run; on an interruption, releases its hosts as the process exits."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "specsweep_interrupt"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._sweep: dict[str, Any] | None = None
        self._deploy: dict[str, Any] | None = None
        self._interrupted = False
        # Workers are forks of this process (subprocess launches do not run fork hooks: ssh is spared).
        os.register_at_fork(after_in_child=die_with_parent)

    def v2_playbook_on_start(self, playbook: Any) -> None:
        # Ansible's own handler (set before callbacks load) tells the workers and, for SIGINT,
        # raises KeyboardInterrupt: SIGTERM is sent down that same path instead of killing us.
        ansible_handler = signal.getsignal(signal.SIGINT)

        def interrupted(signum: int, frame: Any) -> None:
            self._interrupted = True
            if callable(ansible_handler):
                ansible_handler(signal.SIGINT, frame)
            raise KeyboardInterrupt

        signal.signal(signal.SIGINT, interrupted)
        signal.signal(signal.SIGTERM, interrupted)
        atexit.register(self._release)

    def v2_runner_on_ok(self, result: Any) -> None:
        sweep = result._result.get("sweep")
        if result._task.action.endswith("specsweep_plan") and sweep and not result._task.check_mode:
            self._sweep = sweep
        if result._task.action.endswith("specsweep_deploy_plan") and not result._task.check_mode:
            self._deploy = {"run_id": result._result["run_id"], "hosts": list(result._result["targets"])}

    def _release(self) -> None:
        """Run the release playbook for the interrupted sweep's hosts (bounded in time)."""
        if self._interrupted and self._deploy is not None:
            self._run(
                "interrupted: every host of the deploy back to what last passed its gates there",
                settle_argv(context.CLIARGS, self._deploy),
                SETTLE_TIMEOUT_S,
            )
        sweep = self._sweep
        if sweep is None:
            return
        results_dir = Path(sweep["dir"]).parent
        if self._interrupted and not sweep["settings"].get("plan_only"):
            self._run(
                f"interrupted: stopping the servers of sweep {sweep['id']} and releasing its hosts",
                release_argv(context.CLIARGS, sweep, str(results_dir)),
                RELEASE_TIMEOUT_S,
            )
        # The run has ended, interrupted or not: its controller lock goes (its hosts are given back).
        sweeplock.release(sweeplock.lock_path(results_dir, sweep["id"]), sweep["run_id"])

    def _run(self, say: str, argv: list[str], timeout_s: float) -> None:
        """Say `say`, run the playbook of `argv` for at most `timeout_s`, and show what it printed."""
        self._display.display(say)
        try:
            # Its output through this display: its own, inherited, would meet a closing terminal.
            done = subprocess.run(
                argv, cwd=REPO, timeout=timeout_s, check=False, capture_output=True, text=True
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            # What it did get done, to say where it stuck (bytes on a timeout, even with text=True).
            partial = getattr(exc, "stdout", None) or b""
            if partial:
                text = partial.decode(errors="replace") if isinstance(partial, bytes) else partial
                self._display.display(text)
            self._display.warning(f"{Path(argv[1]).name} did not finish: {exc}")
            return
        self._display.display((done.stdout + done.stderr).strip())
        if done.returncode:
            self._display.warning(f"{Path(argv[1]).name}: exit {done.returncode}")
