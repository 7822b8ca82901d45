"""The search's state on disk: facts, claims and the state file of each search in a sweep folder.

Stateless on purpose: a host may ask at any time, several hosts may ask at once, and a resumed
run simply asks again.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from analysis import objectives
from analysis.facts.schema import Fact, SchemaError, load_fact
from analysis.files import write_json_atomic
from analysis.objectives import Objective
from analysis.report.sla import Sla
from analysis.search.decide import Decision, Probe, decide, median_interval
from analysis.search.levels import LevelsDecision, decide_levels
from analysis.search.objective import decode_samples, level_probes, level_samples, levels_of, probe_of
from analysis.sweep import claims


class InputError(ValueError):
    """Bad candidates, arguments or fact files: exit 2 with the message."""


@dataclass(frozen=True)
class Candidate:
    """One config of the search, as the playbook passes it."""

    id: str
    steps: int


@dataclass(frozen=True)
class Asker:
    """Which sweep folder, host, run and scope this call works in; where its files live."""

    root: Path
    host: str
    run_id: str
    scope: Literal["host", "all"]
    profile: str
    # Hosts of this run no longer in it (unreachable, failed): their claims are taken over.
    lost: frozenset[str] = frozenset()
    # The traffic's shares by workload a probe is judged on (the sweep's `mix`); empty: equal
    # shares of the workloads measured (analysis.search.objective.level_samples).
    mix: Mapping[str, float] = field(default_factory=dict)
    # What a probe is judged by (the sweep's `objective`), and the SLOs goodput counts requests within.
    objective: Objective = objectives.DEFAULT
    sla: Sla = field(default_factory=Sla)

    def __post_init__(self) -> None:
        """Refuse goodput without an SLO before anything is read or claimed."""
        if problem := objectives.sla_problem(self.objective, self.sla.given):
            raise InputError(problem)

    @property
    def claims(self) -> Path:
        """This run's claim folder (per host in replicate mode, where hosts do not share work)."""
        base = self.root / ".claims" / self.run_id
        return base / self.host if self.scope == "host" else base

    @property
    def state_path(self) -> Path:
        """search[-HOST][+profile].json at the sweep root (host folders hold only facts)."""
        host = f"-{self.host}" if self.scope == "host" else ""
        suffix = f"+{self.profile}" if self.profile else ""
        return self.root / f"search{host}{suffix}.json"

    def hosts(self) -> list[str]:
        """The host folders whose facts this scope reads."""
        if self.scope == "host":
            return [self.host]
        return sorted(e.name for e in os.scandir(self.root) if e.is_dir() and not e.name.startswith("."))

    def notes(self, config_id: str) -> list[dict[str, Any]]:
        """The note of every claim of this config over all runs (why it was measured)."""
        folder = f"{self.host}/{config_id}" if self.scope == "host" else config_id
        found = (claims.note(p.parent) for p in (self.root / ".claims").glob(f"*/{folder}/{claims.NOTE}"))
        return [n for n in found if n is not None]


def _read_json(path: Path) -> Any:
    """A JSON file, or None when it is missing or half written (a claim's note may lag its mkdir)."""
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def parse_candidates(text: str) -> list[Candidate]:
    """The stdin list [{"id": "s1", "steps": 1}, ...]: distinct ids and steps, one env profile."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise InputError(f"candidates on stdin are not JSON: {exc}") from exc
    if not isinstance(raw, list) or not raw:
        raise InputError("candidates on stdin must be a non-empty JSON list")
    out = []
    for item in raw:
        ok = isinstance(item, dict) and isinstance(item.get("id"), str) and item["id"]
        if not ok or type(item.get("steps")) is not int:
            raise InputError(f'each candidate must be {{"id": str, "steps": int}}, got {item!r}')
        out.append(Candidate(item["id"], item["steps"]))
    for what, values in (("id", [c.id for c in out]), ("steps", [c.steps for c in out])):
        if len(set(values)) != len(values):
            twice = sorted({v for v in values if values.count(v) > 1})
            raise InputError(f"duplicate candidate {what}: {twice}")
    if len({profile_of(c.id) for c in out}) > 1:
        raise InputError("candidates mix env profiles (id suffix +<profile>); call once per profile")
    return out


def profile_of(config_id: str) -> str:
    """The env profile a config id names (s4+nccl -> nccl; '' for the default profile)."""
    return config_id.partition("+")[2]


def _load(path: Path) -> Fact | None:
    """The fact at path, None when absent; a broken fact is an error, not a silent gap."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: unreadable fact: {exc}") from exc
    try:
        return load_fact(data)
    except SchemaError as exc:
        raise InputError(f"{path}: {exc}") from exc


def _baseline_median(asker: Asker, host: str) -> float | None:
    """Median objective value of the host's baseline for this profile, None when it has none that is ok."""
    fact = _load(asker.root / host / f"baseline{'+' + asker.profile if asker.profile else ''}.json")
    samples = decode_samples(fact, shares=asker.mix, objective=asker.objective, sla=asker.sla) if fact else []
    return statistics.median(samples) if samples else None


def _baseline_medians(asker: Asker, host: str) -> dict[int, float]:
    """Median objective value of the host's baseline for this profile at each level it measured."""
    fact = _load(asker.root / host / f"baseline{'+' + asker.profile if asker.profile else ''}.json")
    found = level_samples(fact, asker.mix, asker.objective, asker.sla) if fact else {}
    return {c: statistics.median(s) for c, s in found.items() if s}


@dataclass(frozen=True)
class Observed:
    """Everything on disk about the candidates: facts by id, the probes built from them, the unit.

    `probes` is at each fact's first concurrency level (the single-level search); `levels` holds
    the probes at every level (level -> config id -> probe) for analysis.search.levels, in
    `level_unit`: over each host's baseline at that level where every measuring host has one at
    every level, else raw tok/s.
    """

    facts: dict[str, list[Fact]]
    probes: dict[str, Probe]
    unit: str
    levels: dict[int, dict[str, Probe]] = field(default_factory=dict)
    level_unit: str = objectives.DEFAULT.name


def observe(asker: Asker, candidates: Sequence[Candidate]) -> Observed:
    """Facts of the candidates in scope, and their probes: over each host's baseline where every
    measuring host has one (a mix of ratios and raw tok/s would compare nothing), else raw tok/s."""
    facts: dict[str, list[Fact]] = {}
    for host in asker.hosts():
        for c in candidates:
            fact = _load(asker.root / host / f"{c.id}.json")
            if fact:
                facts.setdefault(c.id, []).append(fact)
    hosts = {f.host for fs in facts.values() for f in fs}
    medians = {h: _baseline_median(asker, h) for h in hosts}
    baselines = medians if all(m is not None for m in medians.values()) else None
    name = asker.objective.name
    unit = f"{name} / host baseline" if baselines else name
    probes = {
        cid: probe_of(fs, baselines, shares=asker.mix, objective=asker.objective, sla=asker.sla)
        for cid, fs in facts.items()
    }
    levels = sorted({c for fs in facts.values() for f in fs for c in levels_of(f)})
    per_host = {h: _baseline_medians(asker, h) for h in hosts}
    ratios = all(c in per_host[h] for h in hosts for c in levels)
    by_level = {c: {h: per_host[h][c] for h in hosts} for c in levels} if ratios else None
    found = {
        cid: level_probes(fs, levels, by_level, asker.mix, asker.objective, asker.sla)
        for cid, fs in facts.items()
    }
    return Observed(
        facts,
        probes,
        unit,
        {c: {cid: p[c] for cid, p in found.items()} for c in levels},
        f"{name} / host baseline" if ratios else name,
    )


def pending_ids(asker: Asker, candidates: Sequence[Candidate], observed: Observed) -> set[str]:
    """Claimed in this run, not measured yet, and neither the asker's own (a host that asks is idle,
    so its own unmeasured claim is a probe that left no fact and is offered to it again) nor a lost
    host's (taken over by the next host that claims it)."""
    try:
        claimed = {e.name for e in os.scandir(asker.claims) if e.is_dir()}
    except FileNotFoundError:
        return set()
    others = {asker.host, *asker.lost}
    return {
        c.id
        for c in candidates
        if c.id in claimed and c.id not in observed.facts and claims.owner(asker.claims / c.id) not in others
    }


def claim(asker: Asker, pick: Candidate, reason: str) -> bool:
    """Claim a config for the asker; True when it is the asker's to measure."""
    about = {"config_id": pick.id, "steps": pick.steps, "host": asker.host, "reason": reason}
    return claims.take(asker.claims / pick.id, about, asker.lost)


def _probe_rows(
    asker: Asker, candidates: Sequence[Candidate], observed: Observed, pending: set[str]
) -> list[dict]:
    """Every probe of the search in launch order (measured, then in flight), with why it ran."""
    rows = []
    for c in candidates:
        notes = sorted(asker.notes(c.id), key=lambda n: n.get("claimed_at") or 0)
        facts = observed.facts.get(c.id)
        if not facts and c.id not in pending:
            continue
        started = min(f.timings.started_at for f in facts) if facts else math.inf
        why = notes[-1].get("reason") if notes else "measured before the search asked (existing fact)"
        hosts = sorted({f.host for f in facts or []})
        state = "measured" if facts else "in flight"
        rows.append(
            {"id": c.id, "steps": c.steps, "state": state, "hosts": hosts, "reason": why, "_order": started}
        )
    rows.sort(key=lambda r: r.pop("_order"))
    return rows


def _summary(probe: Probe) -> dict[str, Any]:
    """One observation as the state file shows it."""
    ci = median_interval(probe)
    return {
        "n": len(probe.samples),
        "failed": probe.failed,
        "median": None if probe.failed else probe.median,
        "ci": list(ci) if ci else None,
    }


def _verdict(decision: Decision, name: Mapping[int, str]) -> dict[str, Any]:
    """A (level's) answer as the state file shows it: best config, how sure, those within noise."""
    return {
        "best": name.get(decision.best) if decision.best is not None else None,
        "sure": decision.sure,
        "confidence": decision.confidence,
        "close": [name[s] for s in decision.close],
    }


def write_state(
    asker: Asker,
    candidates: Sequence[Candidate],
    observed: Observed,
    pending: set[str],
    decision: Decision | LevelsDecision,
    answer: dict[str, Any],
) -> None:
    """Rewrite the state file atomically: what the report and a human read about the search."""
    name = {c.steps: c.id for c in candidates}
    by_id = {c.id: c for c in candidates}
    if isinstance(decision, LevelsDecision):
        verdict = {"levels": {str(c): _verdict(d, name) for c, d in decision.levels.items()}}
    else:
        verdict = _verdict(decision, name)
    state = {
        "scope": asker.scope,
        "host": asker.host,
        "run_id": asker.run_id,
        "profile": asker.profile or "default",
        "updated_at": time.time(),
        "unit": observed.unit,
        # The shares a launch of several workloads was judged on ({}: equal, or one workload).
        "mix": dict(asker.mix),
        "candidates": [{"id": c.id, "steps": c.steps} for c in sorted(candidates, key=lambda c: c.steps)],
        "observations": {
            cid: {"steps": by_id[cid].steps, **_summary(p)} for cid, p in observed.probes.items()
        },
        "pending": sorted(pending),
        "probes": _probe_rows(asker, candidates, observed, pending),
        **verdict,
        "done": answer["action"] == "done",
        "action": answer["action"],
        "reason": answer["reason"],
    }
    write_json_atomic(asker.state_path, state)


def next_step(
    asker: Asker,
    candidates: Sequence[Candidate],
    parallel: int,
    max_launches: int | None,
    levels: Sequence[int] = (),
) -> dict:
    """One call of `next`: decide, claim, record the state; returns the JSON line to print.

    levels: the concurrency levels each launch measures; with several, every level's best step
    count is searched from the same launches (analysis.search.levels).
    """
    observed = observe(asker, candidates)
    pending = pending_ids(asker, candidates, observed)
    by_steps = {c.steps: c for c in candidates}
    by_id = {c.id: c for c in candidates}
    steps = [c.steps for c in candidates]
    in_flight = {c.steps for c in candidates if c.id in pending}
    decision: Decision | LevelsDecision
    if len(levels) > 1:
        seen = {c: {by_id[cid].steps: p for cid, p in observed.levels.get(c, {}).items()} for c in levels}
        decision = decide_levels(steps, levels, seen, in_flight, parallel, max_launches)
    else:
        seen = {by_id[cid].steps: p for cid, p in observed.probes.items()}
        decision = decide(steps, seen, in_flight, parallel, max_launches)
    if decision.action == "done":
        answer = {"action": "done", "best": _bests(decision, by_steps), "reason": decision.reason}
    elif decision.action == "wait":
        answer = {"action": "wait", "reason": decision.reason}
    else:
        won = next((p for p in decision.picks if claim(asker, by_steps[p.steps], p.reason)), None)
        if won:
            answer = {"action": "measure", "config_id": by_steps[won.steps].id, "reason": won.reason}
            pending = pending | {by_steps[won.steps].id}
        else:
            answer = {"action": "wait", "reason": "every planned probe was just claimed by another host"}
    write_state(asker, candidates, observed, pending, decision, answer)
    return answer


def _bests(decision: Decision | LevelsDecision, by_steps: Mapping[int, Candidate]) -> Any:
    """The best config id (one level), or {level: id} (several); None where nothing worked."""
    if isinstance(decision, LevelsDecision):
        return {str(c): _bests(d, by_steps) for c, d in decision.levels.items()}
    return None if decision.best is None else by_steps[decision.best].id


def _steps_text(steps: Sequence[int]) -> str:
    """1..10 for a contiguous range, else the values."""
    ordered = sorted(steps)
    if len(ordered) > 2 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]}..{ordered[-1]}"
    return ", ".join(map(str, ordered))


def _summary_line(state: dict[str, Any]) -> str:
    """One search as a line of text."""
    where = f" on {state['host']}" if state.get("scope") == "host" else ""
    where += f" (profile {state['profile']})" if state.get("profile", "default") != "default" else ""
    shares = state.get("mix") or {}
    where += f" on the mix {','.join(f'{w}={s:g}' for w, s in shares.items())}" if shares else ""
    head = f"search over steps {_steps_text([c['steps'] for c in state['candidates']])}{where}"
    prefix = "best" if state.get("done") else f"in progress ({state.get('action')}), best so far"
    if "levels" in state:  # one answer per concurrency level, from the same launches
        verdict = "; ".join(
            f"{prefix} {v.get('best') or 'none'} at concurrency {c} ({v.get('confidence')})"
            for c, v in sorted(state["levels"].items(), key=lambda kv: int(kv[0]))
        )
    else:
        verdict = f"{prefix} {state.get('best') or 'none'} ({state.get('confidence')})"
    probes = ", ".join(
        f"{p['id']} ({'in flight: ' if p['state'] != 'measured' else ''}{p['reason']})"
        for p in state.get("probes", [])
    )
    return f"{head}: {verdict}; measured {probes or 'nothing yet'}"


def render_summary(sweep_dir: Path | str) -> str:
    """Plain-text lines, one per search of the sweep (search*.json at its root); '' when none."""
    states = (_read_json(p) for p in sorted(Path(sweep_dir).glob("search*.json")))
    return "\n".join(_summary_line(s) for s in states if isinstance(s, dict) and "candidates" in s)
