#!/usr/bin/env python3
"""One night through ansible-runner: playbooks/nightly.yml, with its events and artifacts kept.

    .venv/bin/python scripts/nightly.py [-i INVENTORY] [--history DB] [--dir DIR] [--keep N] [-e VARS]

A night is named nightly-<UTC timestamp>. ansible-runner keeps its events, stdout and exit status
in DIR/artifacts/<night>/; the playbook writes the report and the regression summary (Markdown,
JUnit) to DIR/reports/<night>/; only the newest N of each are kept. The facts (results/<night>/)
and the history are kept whole. Exit status: the playbook's, 0 when nothing regressed or failed.
The systemd timer of playbooks/schedule.yml runs this. SIGTERM or SIGINT (systemctl stop, Ctrl-C)
stops the night as Ctrl-C stops ansible-playbook: its servers stopped, its hosts released.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import signal
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

try:
    import ansible_runner
except ImportError:  # another interpreter than the repo's venv
    sys.exit("scripts/nightly.py needs the repo's venv: .venv/bin/python scripts/nightly.py")

REPO = Path(__file__).resolve().parents[1]
PLAYBOOK = REPO / "playbooks" / "nightly.yml"
DEFAULT_DIR = REPO / "results" / "nightly"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        description="Run one nightly sweep and regression check (playbooks/nightly.yml) with ansible-runner."
    )
    parser.add_argument(
        "-i", "--inventory", action="append", type=Path, default=[], metavar="PATH",
        help="inventory (repeatable; default: the one in ansible.cfg)",
    )  # fmt: skip
    parser.add_argument(
        "--history", type=Path, metavar="DB",
        help="SQLite history store (default: history.sqlite in the sweep results folder)",
    )  # fmt: skip
    parser.add_argument(
        "--dir", type=Path, default=DEFAULT_DIR, metavar="DIR",
        help=f"folder of the nights' artifacts/ and reports/ (default: {DEFAULT_DIR})",
    )  # fmt: skip
    parser.add_argument("--keep", type=int, default=14, metavar="N", help="nights kept (default: 14)")
    parser.add_argument(
        "-e", "--extra-vars", action="append", default=[], metavar="VARS",
        help="extra vars as ansible-playbook -e takes them (KEY=VALUE, JSON, @FILE); repeatable",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.keep < 1:
        parser.error("--keep must be at least 1")
    return args


def night_id(now: datetime) -> str:
    """The sweep id (and runner ident) of the night starting at `now`."""
    return "nightly-" + now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def runner_kwargs(args: argparse.Namespace, night: str) -> dict[str, Any]:
    """ansible_runner.run() arguments for this night."""
    folder = args.dir.resolve()
    extravars = {"sweep_id": night, "nightly_reports_dir": str(folder / "reports")}
    if args.history:
        extravars["nightly_history"] = str(args.history.resolve())
    cmdline = [word for vars_ in args.extra_vars for word in ("-e", vars_)]
    return {
        "private_data_dir": str(folder),
        "artifact_dir": str(folder / "artifacts"),
        "ident": night,
        "rotate_artifacts": args.keep,
        # The repo is the working directory: its ansible.cfg (roles, plugins, inventory) applies.
        "project_dir": str(REPO),
        "playbook": str(PLAYBOOK),
        "inventory": [str(p.resolve()) for p in args.inventory] or None,
        "cmdline": shlex.join(cmdline) or None,
        "extravars": extravars,
        # Nothing in env/ files: they would be reused by the next night instead of its own values.
        "suppress_env_files": True,
        "envvars": {
            # ansible-playbook of this venv, also when started by systemd with a bare PATH.
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
            # ansible-runner turns host key checking off unless told; keep ansible.cfg's policy.
            "ANSIBLE_HOST_KEY_CHECKING": os.environ.get("ANSIBLE_HOST_KEY_CHECKING", "True"),
            # runner sets the callback path and stdout callback through the environment, which hides
            # ansible.cfg's: name ours again (runner appends its own path and wraps our output).
            "ANSIBLE_CALLBACK_PLUGINS": str(REPO / "plugins" / "callback"),
            "ANSIBLE_STDOUT_CALLBACK": "specsweep",
        },
    }


def children() -> list[int]:
    """This process's child processes (ansible-runner's ansible-playbook)."""
    pids = []
    for task in Path("/proc/self/task").iterdir():
        try:
            pids += [int(pid) for pid in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return pids


def stop_as_ctrl_c() -> dict[int, Any]:
    """On SIGTERM or SIGINT, send SIGTERM on to ansible-playbook once, and wait for it.

    ansible-runner's own handling cancels by SIGKILL of the playbook's process group, so its
    interrupt handler (plugins/callback/specsweep_interrupt.py) never runs and the hosts stay held
    until their lease runs out; given SIGTERM, the playbook stops its servers and releases its hosts
    before it exits, and runner then returns its exit status as usual. The playbook runs on its own
    terminal (runner's pexpect), so a Ctrl-C here does not reach it by itself; and under systemd only
    this process is signalled (KillMode=mixed in the unit), so the release is not cut short.
    Returns the handlers it replaced.
    """
    sent: list[int] = []

    def forward(signum: int, frame: Any) -> None:
        for pid in children():
            if pid not in sent:
                sent.append(pid)
                with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                    os.kill(pid, signal.SIGTERM)

    return {signum: signal.signal(signum, forward) for signum in (signal.SIGTERM, signal.SIGINT)}


def rotate(folder: Path, keep: int) -> list[Path]:
    """Remove all but the newest `keep` night folders (nightly-<timestamp> sorts by time); the removed."""
    nights = sorted(p for p in folder.glob("nightly-*") if p.is_dir())
    old = nights[:-keep]
    for path in old:
        shutil.rmtree(path)
    return old


def main(argv: Sequence[str] | None = None) -> int:
    """Run one night; its exit status is the playbook's."""
    args = parse_args(argv)
    night = night_id(datetime.now(UTC))
    args.dir.mkdir(parents=True, exist_ok=True)
    previous = stop_as_ctrl_c()
    try:
        # Never canceled by runner (its cancel is a SIGKILL): a stop reaches the playbook as SIGTERM.
        runner = ansible_runner.run(**runner_kwargs(args, night), cancel_callback=lambda: False)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    removed = rotate(args.dir / "reports", args.keep)
    print(f"night {night}: {runner.status} (exit {runner.rc})")
    print(f"  runner artifacts (events, stdout): {runner.config.artifact_dir}")
    print(f"  report and regression summary:     {args.dir.resolve() / 'reports' / night}")
    if removed:
        print(f"  removed {len(removed)} older report folder(s), keeping {args.keep}")
    return int(runner.rc)


if __name__ == "__main__":
    sys.exit(main())
