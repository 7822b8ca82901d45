"""Where a sweep stands, from the facts on disk: whether to measure a config, the progress line
an operator reads, and at the end which hosts left configs unmeasured and why.

The facts are the record of progress (a resumed run finds what an earlier one measured), so
nothing here is carried from task to task.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.files import write_json_atomic
from analysis.running import race
from analysis.sweep import claims, order
from analysis.sweep.config import Config
from analysis.sweep.hostplan import HostPlan, Slot
from analysis.sweep.plan import duration


def _status(path: Path, before: float | None = None) -> str | None:
    """The status of the fact at path; None when it is absent or unreadable (measured again), or,
    with `before`, when it was started at or after that time (this run's, not an earlier one's)."""
    try:
        fact = json.loads(path.read_bytes())
        started = fact.get("timings", {}).get("started_at")
    except (OSError, ValueError, AttributeError):
        return None
    if before is not None and (not isinstance(started, (int, float)) or started >= before):
        return None
    return fact.get("status")


def measured(sweep_dir: Path, name: str, host: str | None, before: float | None = None) -> bool:
    """True when the sweep folder holds an ok fact of this launch (fact name: config id, or
    `<id>.launch<k>`) on `host`, or on any host, or the record that racing skipped it; with `before`,
    only one started before that time (an earlier run's)."""
    paths = sweep_dir.glob(f"{host or '*'}/{name}.json")
    return any(_status(p, before) in ("ok", "skipped") for p in paths)


def unrecorded(sweep_dir: Path, config_ids: Iterable[str]) -> list[str]:
    """The configs no host has a fact of yet (ok or failed): those the pass for lost hosts' claims
    still has to look at."""
    return [c for c in config_ids if not any(sweep_dir.glob(f"*/{c}.json"))]


def unrecorded_slots(sweep_dir: Path, host: HostPlan) -> list[Slot]:
    """Shard mode's last pass: this host's launches of the shared configs that no host has a fact
    of yet (those of hosts that left the run among them), in this host's order."""
    shared = [s for s in host.order if s.speculative]
    left = set(unrecorded(sweep_dir, [s.name for s in shared]))
    return [s for s in shared if s.name in left]


def claims_first(mode: str, config: Config, claimed: bool) -> bool:
    """Whether a launch goes to the first host to claim it: a speculative config in shard mode,
    unless the caller has claimed it already (a step search claims its probes itself)."""
    return mode == "shard" and config.speculative and not claimed


@dataclass(frozen=True)
class Done:
    """This host's configs of this run so far: how many, how many failed, how long each took."""

    durations: list[float]
    failed: int

    @classmethod
    def read(cls, host_dir: Path, since: float) -> Done:
        """The facts of `host_dir` written since the run started."""
        durations, failed = [], 0
        for path in host_dir.glob("*.json"):
            try:
                fact = json.loads(path.read_bytes())
                timings = fact["timings"]
                if timings["started_at"] < since or fact.get("status") == "skipped":
                    continue
                durations.append(timings["finished_at"] - timings["started_at"])
                failed += fact.get("status") == "failed"
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return cls(durations, failed)


def progress_line(index: int, total: int, config_id: str, state: str, done: Done) -> str:
    """`config 3/5 s2: launching; 2 measured here (0 failed); ETA 4 min` (a config's later
    launches are named `s2.launch2`; every launch counts)."""
    eta = ""
    if done.durations and state.startswith("launching"):
        left = total - index
        eta = f"; ETA {duration(sum(done.durations) / len(done.durations) * left)}"
    return (
        f"config {index + 1}/{total} {config_id}: {state}; {len(done.durations)} measured here "
        f"({done.failed} failed){eta}"
    )


def start(
    where: Mapping[str, Any],
    config_id: str,
    index: int,
    total: int,
    shared: bool,
    since: float,
    lost: Collection[str] = (),
    retake: bool = False,
    launch: int = 1,
    race: bool = False,
) -> dict[str, Any]:
    """Whether this host measures the config now (`measure`), waits for another host's claim of it
    (`wait`), and the line that says so.

    where: the sweep folder (`dir`), this run (`run_id`), this host (`host`) and the host it
    follows, if any (`follows`: a follower runs exactly the configs its leader runs).
    shared: shard mode, the first host to claim a config measures it; a claim of a host in `lost`
    (it left the run) is taken over. retake: the pass after a host's own configs, which measures
    what lost hosts had claimed and waits while live ones are still measuring theirs.
    launch: which launch of the config this is (its fact and its claim are named for it).
    race: a launch >= 2 of a config that lost to this host's best so far is not run (analysis.running.race).
    """
    root = Path(where["dir"])
    leader = where.get("follows") or where["host"]
    name = order.fact_name(config_id, launch)
    folder = root / ".claims" / where["run_id"] / name
    holder = claims.owner(folder) if shared else None
    wait = False
    why = race_reason(root / leader, config_id) if race and launch >= 2 and not where.get("follows") else None
    # A follower runs its part of every launch its leader runs in this run, even one the leader
    # recorded before the follower got to it; only an earlier run's fact (a resume) is skipped.
    before = since if where.get("follows") else None
    if measured(root, name, None if shared else leader, before) or (retake and not unrecorded(root, [name])):
        state = "measured already, skipped"
    elif why:
        state = f"raced out ({why}), not launched"
        _record_raced(root / leader, config_id, launch, why)
    elif shared and not claims.take(folder, {"config_id": name, "host": where["host"]}, lost):
        state, wait = "taken by another host", retake
    elif holder in lost:
        state = f"launching (taking over from {holder}, which left the run)"
    else:
        state = "launching"
    done = Done.read(root / where["host"], since)
    # The pass for lost hosts' claims says only what it takes over.
    say = (
        progress_line(index, total, name, state, done) if state.startswith("launching") or not retake else ""
    )
    return {
        "measure": state.startswith("launching"),
        "wait": wait,
        "started_at": time.time(),
        "specsweep_say": say,
    }


def race_reason(host_dir: Path, config_id: str) -> str | None:
    """Why racing stops this config's further launches on this host (None: it goes on)."""
    return race.raced_out(race.table(race.facts(host_dir), sweep_dir=host_dir.parent), config_id)


def _record_raced(host_dir: Path, config_id: str, launch: int, why: str) -> None:
    """The launch racing did not run, on disk as its own (skipped) fact: resume passes it by."""
    previous = race.previous_fact(host_dir, config_id)
    if previous is not None:
        doc = race.skipped_fact(previous, launch, why, time.time())
        write_json_atomic(host_dir / f"{order.fact_name(config_id, launch)}.json", doc)


def host_state(host_vars: Mapping[str, Any]) -> str:
    """How far a host got, from what its tasks registered (they stay after it fails)."""
    lock = host_vars.get("specsweep_lock") or {}
    if lock.get("refusal"):
        holder = lock.get("holder") or {}
        return f"in use by sweep {holder.get('sweep_id', '?')} (run {holder.get('run_id', '?')})"
    if lock.get("unreachable") or not lock:
        return "not reached"
    if "specsweep_released" in host_vars:
        return "finished"
    if "specsweep_start" in host_vars:
        return "lost mid-sweep"
    preflight = host_vars.get("specsweep_preflight") or {}
    return "stopped in preflight" + (
        f": {'; '.join(preflight['problems'])}" if preflight.get("problems") else ""
    )


def kept(sweep_id: str, hosts: Sequence[str], host_vars: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """'host: N fact(s) kept on the host ...' for each host whose facts the controller could not write
    (what its tasks noted as `specsweep_kept`: each launch's fact name and path on the host)."""
    lines = []
    for host in hosts:
        facts = host_vars[host].get("specsweep_kept") or []
        if facts:
            where = ", ".join(f"{k['name']} at {k['dest']}" for k in facts)
            lines.append(
                f"{host}: {len(facts)} fact(s) kept on the host, not written to the results dir: {where}; "
                f"free space, then -e resume={sweep_id} records them without measuring them again"
            )
    return lines


def dropped(sweep_id: str, hosts: Sequence[str], host_vars: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """'host: not launched: s1.launch2 ...' for each host whose finalist launches were dropped (what
    its finalists task returned as `dropped`): their first launches' facts were kept on the host."""
    lines = []
    for host in hosts:
        names = (host_vars[host].get("specsweep_finalists") or {}).get("dropped") or []
        if names:
            lines.append(
                f"{host}: not launched: {', '.join(names)} (the finalist launch of a config whose fact is "
                f"kept on the host, so not judged); -e resume={sweep_id} records it, then judges"
            )
    return lines


def unmeasured(
    sweep_dir: Path, hosts: Sequence[str], configs: Sequence[Mapping[str, Any]], settings: Mapping[str, Any],
    states: Mapping[str, str], launches: Mapping[str, Sequence[Slot]] | None = None,
    kept: Mapping[str, Collection[str]] | None = None,
) -> list[str]:  # fmt: skip
    """'host: state; not measured: a, b' for each host that did not finish or left configs without a fact.

    Failed configs have a fact (and are reported as failures); this is what no fact records:
    hosts lost before or during the sweep (named even when other hosts measured their share).
    Shard mode and searches expect only each host's baselines; a shard config no host measured is
    listed under '(shard)'. launches: each host's planned launches (its order and closing); without
    them each config's first launch is expected. kept: each host's
    facts kept on the host (measured, listed by `kept`).
    """
    present = {(p.parent.name, p.stem) for p in sweep_dir.glob("*/*.json")}
    present |= {(h, name) for h, names in (kept or {}).items() for name in names}
    shared = settings.get("mode") == "shard" or bool(settings.get("search"))
    lines = []
    for host in hosts:
        slots = (launches or {}).get(host) or []
        planned = [(s.name, s.speculative) for s in slots] or [(c["id"], c["speculative"]) for c in configs]
        expected = [name for name, speculative in planned if not (shared and speculative)]
        missing = [cid for cid in expected if (host, cid) not in present]
        state = states.get(host, "not reached")
        if missing or state != "finished":
            lines.append(f"{host}: {state}" + (f"; not measured: {', '.join(missing)}" if missing else ""))
    if settings.get("mode") == "shard" and not settings.get("search"):
        nobody = [c["id"] for c in configs if c["speculative"] and c["id"] not in {cid for _, cid in present}]
        if nobody:
            lines.append(f"(shard): not measured by any host: {', '.join(nobody)}")
    return lines


def failed_configs(sweep_dir: Path, hosts: Sequence[str]) -> list[str]:
    """'host/config' of every failed fact of the sweep's hosts."""
    return sorted(
        f"{p.parent.name}/{p.stem}"
        for h in hosts
        for p in (sweep_dir / h).glob("*.json")
        if _status(p) == "failed"
    )
