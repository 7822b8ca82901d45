"""One run per sweep id on the controller, and no facts of another plan in its folder.

The plan takes the sweep's controller lock before it writes anything (sweep.json, plan.json): a
second run with the same `-e sweep_id` or `-e resume` while the first runs is refused, whatever
hosts it targets. The lock records the run's owner (analysis.sweep.identity.run_owner); a lock whose
ansible-playbook process is gone is taken over. A run removes its lock as it exits
(plugins/callback/specsweep_interrupt.py); the locks of runs killed outright are removed by the
next run that takes a lock in the same results dir. A run of a sweep that
already holds facts must measure as they were measured (same argv, env and benchmark settings per
host and config): otherwise one table would mix them, and it is refused.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from analysis.redact import redact_argv, redact_env
from analysis.sweep import identity
from analysis.sweep.hostplan import Entry, HostPlan

# The request settings a fact's benchmark records (schema.BenchmarkSettings).
MEASURED = ("max_tokens", "warmup", "repeats", "concurrency")


def lock_path(results_dir: Path, sweep_id: str) -> Path:
    """Beside the sweep folders, not in one: nothing of the sweep is written before it is taken."""
    return results_dir / ".locks" / f"{sweep_id}.lock"


@contextmanager
def _held(path: Path, create: bool = False) -> Iterator[tuple[TextIO, dict[str, Any]] | None]:
    """The lock file at `path` (created when `create`) under flock, with its record; None when it is
    not there, or was removed by a release or a prune while this waited for it."""
    try:
        fh = open(path, "a+" if create else "r+", encoding="utf-8")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        yield None
        return
    with fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # two runs starting together: one reads what the other wrote
        try:
            current = os.stat(path).st_ino == os.fstat(fh.fileno()).st_ino
        except FileNotFoundError:
            current = False
        if not current:
            yield None
            return
        fh.seek(0)
        try:
            holder = json.loads(fh.read() or "{}")
        except ValueError:
            holder = {}
        yield fh, holder if isinstance(holder, dict) else {}


def acquire(path: Path, owner: Mapping[str, Any]) -> str | None:
    """Take the lock at `path` for `owner`; a sentence naming the live holder when it is taken.
    Lock files of other sweeps whose runs are gone are removed on the way (prune)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    prune(path.parent, keep=path)
    while True:
        with _held(path, create=True) as held:
            if held is None:
                continue  # removed meanwhile: take a fresh one
            fh, holder = held
            mine = holder.get("run_id") == owner["run_id"]
            if holder and not mine and identity.holder_alive(holder):
                return _running(owner["sweep_id"], holder)
            fh.seek(0)
            fh.truncate()
            fh.write(json.dumps(dict(owner), sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
            return None


def _running(sweep_id: str, holder: Mapping[str, Any]) -> str:
    """Why a run of `sweep_id` is refused while `holder` runs it."""
    return (
        f"sweep {sweep_id} is running: run {holder.get('run_id', '?')}, ansible-playbook "
        f"pid {holder.get('pid', '?')} on {holder.get('controller', '?')}; this run writes nothing. "
        f"Resume it once it has ended (-e resume={sweep_id}), or choose another sweep_id."
    )


def release(path: Path, run_id: str) -> bool:
    """Remove the lock at `path` when run `run_id` holds it (the run has ended); True when removed."""
    with _held(path) as held:
        if held is None or held[1].get("run_id") != run_id:
            return False
        path.unlink()
        return True


def prune(folder: Path, keep: Path | None = None) -> list[Path]:
    """Remove the lock files in `folder` (`keep` aside) whose runs are gone: killed runs leave
    theirs. A lock of another controller is kept (this one cannot tell). Returns those removed."""
    removed = []
    for path in sorted(folder.glob("*.lock")):
        if path == keep:
            continue
        with _held(path) as held:
            if held is not None and not identity.holder_alive(held[1]):
                path.unlink()
                removed.append(path)
    return removed


def _fact(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # unreadable: the report names it, nothing here to compare
    return doc if isinstance(doc, dict) else None


def other_plan(sweep_dir: Path, hosts: Mapping[str, HostPlan], settings: Mapping[str, Any]) -> list[str]:
    """A sentence per recorded fact of this plan's hosts and configs that was measured otherwise."""
    found = []
    for host, host_plan in sorted(hosts.items()):
        for entry in host_plan.entries:
            fact = _fact(sweep_dir / host / f"{entry.config.id}.json")
            said = None if fact is None else measured_otherwise(fact, host, entry, settings)
            if said:
                found.append(said)
    return found


def measured_otherwise(
    fact: Mapping[str, Any], host: str, entry: Entry, settings: Mapping[str, Any]
) -> str | None:
    """How a fact (as stored) of `host` was measured otherwise than `entry` and `settings` say,
    in a sentence; None when it was measured as they say."""
    launch = fact.get("launch") or {}
    differs = []
    if launch.get("argv") != redact_argv(entry.argv):
        differs.append(f"argv {' '.join(launch.get('argv') or [])!r}")
    if launch.get("env") != redact_env(entry.env):
        differs.append(f"env {launch.get('env')!r}")
    bench = fact.get("benchmark") or {}
    differs += [f"{key} {bench[key]!r} (now {settings[key]!r})" for key in MEASURED
                if key in bench and bench[key] != settings[key]]  # fmt: skip
    return f"{host}/{entry.config.id} was measured with {'; '.join(differs)}" if differs else None
