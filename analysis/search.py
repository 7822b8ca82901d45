"""Find the step count with the highest decode throughput in few server launches (issue 6).

Why a search: a sweep launches the server once per config, and on a large model a launch costs
10-15 minutes of an 8-GPU host. Throughput against steps is unimodal (it rises while the extra
drafted tokens get accepted, then falls once drafting costs more than it saves; an OOM at high
steps only adds a failing tail), so a bracketing search finds the best of ten step counts in five
launches instead of ten.

Three layers, the first two free of I/O and of pandas (the CLI runs once per probe):
- `decide`: observations in; the next probes, `wait` or `done` out. Probes are placed by an exact
  minimax over the bracket around the best measured point: for one probe a round that is the
  integer Fibonacci search, for k hosts it is a (k+1)-section search that reuses the measured
  point; the worst case is therefore proven by exhaustive tests, not argued. Noise: two probes are
  compared with a 95% Welch t-interval on log samples, as the report's speedup intervals are. A
  measured neighbour within noise of the best does not close the bracket on its side: the search
  probes beyond it, and the answer names it instead of claiming a winner.
- the objective read from facts: per-repeat decode tok/s at the first concurrency, over the
  median of the same host's baseline, so the hosts of a shard are comparable.
- `python -m analysis.search next`: stateless. The facts on disk and the claim folders are the
  whole state, so a host may ask at any time, several hosts may ask at once, and a resumed run
  simply asks again.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from analysis.record import write_json_atomic
from analysis.rows import run_numbers
from analysis.schema import Fact, SchemaError, load_fact
from analysis.tquantiles import KNOTS as _T_KNOTS

# ---------------------------------------------------------------------------------------------
# Pure core
# ---------------------------------------------------------------------------------------------

Action = Literal["measure", "wait", "done"]
# A placement's cost: (worst-case rounds, expected rounds, expected launches) to finish.
Value = tuple[int, float, float]


@dataclass(frozen=True)
class Probe:
    """What one candidate's measurements say: per-repeat objective samples, or that it failed."""

    samples: tuple[float, ...] = ()
    failed: bool = False

    def __post_init__(self) -> None:
        if not self.failed and not self.samples:
            raise ValueError("a probe that did not fail needs samples")
        if not all(s > 0 for s in self.samples):
            raise ValueError("samples must be positive numbers (they are compared as logs)")

    @functools.cached_property
    def median(self) -> float:
        """The point estimate; a failure ranks below every success."""
        return -math.inf if self.failed else statistics.median(self.samples)

    @functools.cached_property
    def log_var(self) -> float:
        """Sample variance of the log samples: intervals are of ratios, as in analysis.stats.

        Plain floats, not statistics.variance (exact fractions): decide() compares many pairs.
        """
        logs = [math.log(s) for s in self.samples]
        mean = math.fsum(logs) / len(logs)
        return math.fsum((x - mean) ** 2 for x in logs) / (len(logs) - 1)


@dataclass(frozen=True)
class Pick:
    """One step value to launch now, and why."""

    steps: int
    reason: str


@dataclass(frozen=True)
class Decision:
    """What to do next; best/sure/confidence/close describe the best so far (final once done)."""

    action: Action
    reason: str
    picks: tuple[Pick, ...] = ()
    best: int | None = None
    sure: bool = False
    confidence: str = ""
    close: tuple[int, ...] = ()  # step values within noise of the best


def t975(df: float) -> float:
    """t quantile of a two-sided 95% interval at (possibly fractional) df, linear in 1/df."""
    inv = 1.0 / max(df, 1.0)
    for (x0, y0), (x1, y1) in itertools.pairwise(_T_KNOTS):
        if inv <= x1:
            return y0 + (y1 - y0) * (inv - x0) / (x1 - x0)
    return _T_KNOTS[-1][1]


def half_width(a: Probe, b: Probe) -> float | None:
    """Half-width of the 95% Welch interval of log(a/b); None when a side has fewer than 2 samples."""
    na, nb = len(a.samples), len(b.samples)
    if na < 2 or nb < 2:
        return None
    va, vb = a.log_var / na, b.log_var / nb
    if va + vb == 0:
        return 0.0  # identical repeats on both sides: known exactly
    df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    return t975(df) * math.sqrt(va + vb)


def within_noise(a: Probe, b: Probe) -> bool | None:
    """True when a and b cannot be told apart at 95%; None when the noise is unknown (1 repeat)."""
    if a.failed or b.failed:
        return False
    half = half_width(a, b)
    if half is None:
        return None
    return abs(math.log(a.median / b.median)) < half


def median_interval(p: Probe) -> tuple[float, float] | None:
    """95% interval around a probe's median (its error bar); None without 2 successful samples."""
    n = len(p.samples)
    if p.failed or n < 2:
        return None
    half = t975(n - 1) * math.sqrt(p.log_var / n)
    return p.median * math.exp(-half), p.median * math.exp(half)


@functools.cache
def _placement(width: int, centre: int | None, k: int) -> tuple[Value, tuple[int, ...]]:
    """Best up-to-k probes among `width` slots, one of them (`centre`) measured and best so far.

    Exact minimax: any measured point may turn out best, and the next bracket is the open interval
    between its measured neighbours; placements are ranked by worst-case rounds, then expected
    rounds and launches for a peak uniform over the slots. With k = 1 this is the integer Fibonacci
    search (optimal for any width, not only Fibonacci numbers). The cost grows as width^(k+2):
    instant for ten candidates, seconds past twenty with k >= 3.
    """
    free = [i for i in range(width) if i != centre]
    if not free:
        return (0, 0.0, 0.0), ()
    options = (
        (_value(combo, centre, width, k), combo)
        for j in range(1, min(k, len(free)) + 1)
        for combo in itertools.combinations(free, j)
    )
    return min(options, key=lambda option: option[0])


def _value(probes: tuple[int, ...], centre: int | None, width: int, k: int) -> Value:
    """Cost of launching `probes` now: one round, then the worst / average bracket left."""
    known = sorted((*probes, centre)) if centre is not None else list(probes)
    edges = [-1, *known, width]
    last = len(known) - 1
    worst, rounds, launches, total = 0, 0.0, 0.0, 0.0
    for i, q in enumerate(known):
        lo, hi = edges[i], edges[i + 2]
        sub = _placement(hi - lo - 1, q - lo - 1, k)[0]
        # A peak in an outer gap makes q the winner; in an inner gap, q or its neighbour.
        weight = 1 + (q - lo - 1) * (1.0 if i == 0 else 0.5) + (hi - q - 1) * (1.0 if i == last else 0.5)
        worst = max(worst, sub[0])
        rounds += weight * sub[1]
        launches += weight * sub[2]
        total += weight
    # Rounded so that mirror-image placements tie exactly and the first one listed wins.
    return 1 + worst, round(1 + rounds / total, 9), round(len(probes) + launches / total, 9)


@dataclass(frozen=True)
class _View:
    """The measured points over the sorted candidates (positions), and the best of them."""

    steps: list[int]
    measured: dict[int, Probe]

    def label(self, pos: int) -> str:
        """How reasons name a candidate: s<steps>."""
        return f"s{self.steps[pos]}"

    def span(self, lo: int, hi: int) -> str:
        """The candidates strictly between positions lo and hi, as a range."""
        return self.label(lo + 1) if hi - lo == 2 else f"{self.label(lo + 1)}..{self.label(hi - 1)}"

    @functools.cached_property
    def best(self) -> int | None:
        """Position of the highest median (ties: fewer steps); None before any measurement."""
        if not self.measured:
            return None
        return max(self.measured, key=lambda i: (self.measured[i].median, -i))

    def bracket(self, pos: int) -> tuple[int, int]:
        """The measured positions nearest `pos` on each side (-1 and n where there are none)."""
        lower = [i for i in self.measured if i < pos]
        upper = [i for i in self.measured if i > pos]
        return max(lower, default=-1), min(upper, default=len(self.steps))

    def noise(self, pos: int) -> bool | None:
        """Whether measured `pos` is within noise of the best (None: noise unknown)."""
        return within_noise(self.measured[pos], self.measured[self.best])

    def beyond(self, edge: int) -> int | None:
        """First unmeasured position past `edge` (away from the best), crossing only points within
        noise of the best: where the bracket is still open on that side."""
        step = 1 if edge > self.best else -1
        pos = edge
        while 0 <= pos < len(self.steps):
            if pos not in self.measured:
                return pos
            if not self.noise(pos):
                return None
            pos += step
        return None


def _plan(view: _View, k: int) -> list[tuple[int, str]]:
    """Up to k (position, reason) to probe next, most useful first."""
    n = len(view.steps)
    b = view.best
    if b is None:
        _, offsets = _placement(n, None, k)
        first = "first Fibonacci probe" if k == 1 else f"opening probe ({k} hosts at once)"
        return [(o, f"{first} over {view.span(-1, n)}") for o in offsets]
    lo, hi = view.bracket(b)
    _, offsets = _placement(hi - lo - 1, b - lo - 1, k)
    kind = "Fibonacci probe" if k == 1 else f"section probe ({k} hosts)"
    picks = [
        (lo + 1 + o, f"{kind} of {view.span(lo, hi)} around best so far {view.label(b)}") for o in offsets
    ]
    noisy = [e for e in (lo, hi) if 0 <= e < n and view.noise(e)]
    for edge in sorted(noisy, key=lambda e: -view.measured[e].median):
        pos = view.beyond(edge)
        if pos is not None and pos not in {p for p, _ in picks}:
            reason = f"{view.label(edge)} within noise of best so far {view.label(b)}: probing beyond it"
            picks.append((pos, reason))
    return picks[:k]


def _verdict(view: _View, unfinished: bool, budget: int) -> tuple[bool, str, tuple[int, ...]]:
    """(sure, confidence, positions within noise) of the best so far."""
    b = view.best
    if b is None:
        return False, "nothing measured yet", ()
    if view.measured[b].failed:
        return False, "every probe failed", ()
    others = [i for i in sorted(view.measured) if i != b]
    close = tuple(i for i in others if view.noise(i))
    ties = [
        i for i in others if view.noise(i) is False and view.measured[i].median == view.measured[b].median
    ]
    edges = [e for e in view.bracket(b) if e in view.measured]
    doubts = []
    if close:
        doubts.append("within noise of " + ", ".join(map(view.label, close)))
    if any(view.noise(e) is None for e in edges):
        doubts.append("noise unknown (fewer than 2 repeats)")
    if unfinished:
        doubts.append(f"launch budget ({budget}) spent before the bracket closed")
    if doubts:
        return False, "; ".join(doubts), close
    slower = [view.label(e) for e in edges if e not in ties and not view.measured[e].failed]
    failed = [view.label(e) for e in edges if view.measured[e].failed]
    facts = [f"{', '.join(slower)} clearly slower"] if slower else []
    facts += [f"{', '.join(failed)} failed"] if failed else []
    facts += [f"ties {', '.join(map(view.label, ties))}"] if ties else []
    return True, "sure" + (": " + "; ".join(facts) if facts else ""), close


def decide(
    candidates: Sequence[int],
    observations: Mapping[int, Probe],
    pending: set[int],
    parallel: int,
    max_launches: int | None = None,
) -> Decision:
    """The next step of the search over `candidates` (step values; order does not matter).

    observations: measured step values (others are ignored). pending: launched elsewhere, no
    result yet. parallel: hosts searching together (probes per round). A pending probe that the
    current plan does not contain was planned from older results, so the plan waits for it: rounds
    stay synchronous and no host launches a probe that the pending result could make pointless.
    max_launches (default: the number of candidates) caps measured + pending.
    """
    steps = sorted(candidates)
    if not steps or len(set(steps)) != len(steps):
        raise ValueError("candidates must be distinct step values, at least one")
    if parallel < 1:
        raise ValueError("parallel must be at least 1")
    budget = len(steps) if max_launches is None else max_launches
    view = _View(steps, {i: observations[s] for i, s in enumerate(steps) if s in observations})
    in_flight = {i for i, s in enumerate(steps) if s in pending and i not in view.measured}
    plan = _plan(view, parallel)
    room = budget - len(view.measured) - len(in_flight)
    sure, confidence, close = _verdict(view, bool(plan) and room <= 0 and not in_flight, budget)
    best = None if view.best is None or view.measured[view.best].failed else steps[view.best]
    common = {"best": best, "sure": sure, "confidence": confidence, "close": tuple(steps[i] for i in close)}
    stale = sorted(in_flight - {p for p, _ in plan})
    free = [(p, why) for p, why in plan if p not in in_flight][: max(room, 0)]
    if stale:
        waited = ", ".join(map(view.label, stale))
        return Decision(
            "wait", f"waiting for {waited} (in flight): its result decides the next probe", **common
        )
    if free:
        picks = tuple(Pick(steps[p], why) for p, why in free)
        return Decision("measure", picks[0].reason, picks, **common)
    if in_flight:
        return Decision("wait", "every planned probe is in flight", **common)
    label = "none" if best is None else f"s{best}"
    reason = f"search finished after {len(view.measured)} launches: best {label}, {confidence}"
    return Decision("done", reason, **common)


# ---------------------------------------------------------------------------------------------
# Objective from facts
# ---------------------------------------------------------------------------------------------


def decode_samples(fact: Fact) -> list[float]:
    """Per-repeat decode tok/s at the fact's first concurrency level, as the report computes it.

    Only completed repeats count (the report's medians skip failed runs too); none for a failed fact.
    """
    if fact.status != "ok" or fact.failure is not None or not fact.runs:
        return []
    level = (
        fact.benchmark.concurrency[0]
        if fact.benchmark and fact.benchmark.concurrency
        else fact.runs[0].concurrency
    )
    numbers = [run_numbers(r) for r in fact.runs if r.concurrency == level]
    return [x["decode_tps"] for x in numbers if x["run_ok"] and x["decode_tps"] and x["decode_tps"] > 0]


def probe_of(facts: Sequence[Fact], baselines: Mapping[str, float] | None) -> Probe:
    """One candidate's probe from its facts (one per host that measured it).

    baselines: median baseline tok/s by host, to divide by; None for raw tok/s. A candidate that
    produced no number on any host is a failed probe.
    """
    samples = [s / (baselines[f.host] if baselines else 1.0) for f in facts for s in decode_samples(f)]
    return Probe(tuple(samples)) if samples else Probe(failed=True)


# ---------------------------------------------------------------------------------------------
# Command line: python -m analysis.search next
# ---------------------------------------------------------------------------------------------


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
        """The probe.json of every claim of this config over all runs (why it was measured)."""
        folder = f"{self.host}/{config_id}" if self.scope == "host" else config_id
        pattern = f"*/{folder}/probe.json"
        return [n for n in map(_read_json, (self.root / ".claims").glob(pattern)) if isinstance(n, dict)]


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
    """Median decode tok/s of the host's baseline for this profile, None when it has none that is ok."""
    fact = _load(asker.root / host / f"baseline{'+' + asker.profile if asker.profile else ''}.json")
    samples = decode_samples(fact) if fact else []
    return statistics.median(samples) if samples else None


@dataclass(frozen=True)
class Observed:
    """Everything on disk about the candidates: facts by id, the probes built from them, the unit."""

    facts: dict[str, list[Fact]]
    probes: dict[str, Probe]
    unit: str


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
    unit = "decode tok/s / host baseline" if baselines else "decode tok/s"
    return Observed(facts, {cid: probe_of(fs, baselines) for cid, fs in facts.items()}, unit)


def claim_owner(asker: Asker, config_id: str) -> str | None:
    """Host that claimed the config in this run (from its note); None if unknown."""
    note = _read_json(asker.claims / config_id / "probe.json")
    return note.get("host") if isinstance(note, dict) else None


def pending_ids(asker: Asker, candidates: Sequence[Candidate], observed: Observed) -> set[str]:
    """Claimed in this run, not measured yet, and not the asker's own: a host that asks is idle,
    so its own unmeasured claim is a probe that left no fact and is offered to it again."""
    try:
        claimed = {e.name for e in os.scandir(asker.claims) if e.is_dir()}
    except FileNotFoundError:
        return set()
    return {
        c.id
        for c in candidates
        if c.id in claimed and c.id not in observed.facts and claim_owner(asker, c.id) != asker.host
    }


def claim(asker: Asker, pick: Candidate, reason: str) -> bool:
    """Claim a config for the asker (mkdir is atomic); True when it is the asker's to measure."""
    asker.claims.mkdir(parents=True, exist_ok=True)
    folder = asker.claims / pick.id
    try:
        os.mkdir(folder)
    except FileExistsError:
        return claim_owner(asker, pick.id) == asker.host
    note = {"config_id": pick.id, "steps": pick.steps, "host": asker.host, "reason": reason}
    note["claimed_at"] = time.time()
    write_json_atomic(folder / "probe.json", note)
    return True


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


def write_state(
    asker: Asker,
    candidates: Sequence[Candidate],
    observed: Observed,
    pending: set[str],
    decision: Decision,
    answer: dict[str, Any],
) -> None:
    """Rewrite the state file atomically: what the report and a human read about the search."""
    name = {c.steps: c.id for c in candidates}
    by_id = {c.id: c for c in candidates}
    state = {
        "scope": asker.scope,
        "host": asker.host,
        "run_id": asker.run_id,
        "profile": asker.profile or "default",
        "updated_at": time.time(),
        "unit": observed.unit,
        "candidates": [{"id": c.id, "steps": c.steps} for c in sorted(candidates, key=lambda c: c.steps)],
        "observations": {
            cid: {"steps": by_id[cid].steps, **_summary(p)} for cid, p in observed.probes.items()
        },
        "pending": sorted(pending),
        "probes": _probe_rows(asker, candidates, observed, pending),
        "best": name.get(decision.best),
        "sure": decision.sure,
        "confidence": decision.confidence,
        "close": [name[s] for s in decision.close],
        "done": answer["action"] == "done",
        "action": answer["action"],
        "reason": answer["reason"],
    }
    write_json_atomic(asker.state_path, state)


def next_step(asker: Asker, candidates: Sequence[Candidate], parallel: int, max_launches: int | None) -> dict:
    """One call of `next`: decide, claim, record the state; returns the JSON line to print."""
    observed = observe(asker, candidates)
    pending = pending_ids(asker, candidates, observed)
    by_steps = {c.steps: c for c in candidates}
    decision = decide(
        [c.steps for c in candidates],
        {c.steps: observed.probes[c.id] for c in candidates if c.id in observed.probes},
        {c.steps for c in candidates if c.id in pending},
        parallel,
        max_launches,
    )
    if decision.action == "done":
        best = by_steps[decision.best].id if decision.best is not None else None
        answer = {"action": "done", "best": best, "reason": decision.reason}
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
    head = f"search over steps {_steps_text([c['steps'] for c in state['candidates']])}{where}"
    best = state.get("best") or "none"
    action = state.get("action")
    verdict = f"best {best}" if state.get("done") else f"in progress ({action}), best so far {best}"
    probes = ", ".join(
        f"{p['id']} ({'in flight: ' if p['state'] != 'measured' else ''}{p['reason']})"
        for p in state.get("probes", [])
    )
    return f"{head}: {verdict} ({state.get('confidence')}); measured {probes or 'nothing yet'}"


def render_summary(sweep_dir: Path | str) -> str:
    """Plain-text lines, one per search of the sweep (search*.json at its root); '' when none."""
    states = (_read_json(p) for p in sorted(Path(sweep_dir).glob("search*.json")))
    return "\n".join(_summary_line(s) for s in states if isinstance(s, dict) and "candidates" in s)


def _name(text: str) -> str:
    """A host or run id, used as one path component."""
    if not text or "/" in text or text.startswith("."):
        raise argparse.ArgumentTypeError(f"{text!r} is not a plain name")
    return text


def _positive(text: str) -> int:
    """An integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not >= 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    """`next`, which the playbook calls once per free host; `summary` for the report."""
    parser = argparse.ArgumentParser(prog="python -m analysis.search", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    nxt = sub.add_parser("next", help="decide the next probe; candidates as JSON on stdin")
    nxt.add_argument("--sweep-dir", required=True, type=Path, help="results/<sweep_id>")
    nxt.add_argument("--host", required=True, type=_name, help="the host asking")
    nxt.add_argument("--run-id", required=True, type=_name, help="this run's id (claims live under it)")
    nxt.add_argument("--parallel", type=_positive, default=1, help="hosts searching together")
    nxt.add_argument(
        "--scope", required=True, choices=["host", "all"], help="host: own facts; all: all hosts'"
    )
    nxt.add_argument("--max-launches", type=_positive, help="launch budget (default: number of candidates)")
    summary = sub.add_parser("summary", help="print what each search of a sweep found, and why")
    summary.add_argument("--sweep-dir", required=True, type=Path, help="results/<sweep_id>")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Print one JSON line; 0 on any decision, 2 on bad input (message on stderr)."""
    args = build_parser().parse_args(argv)
    if args.command == "summary":
        print(render_summary(args.sweep_dir) or f"{args.sweep_dir}: no step search here")
        return 0
    try:
        try:
            text = sys.stdin.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read candidates from stdin: {exc}") from exc
        candidates = parse_candidates(text)
        if not args.sweep_dir.is_dir():
            raise InputError(f"{args.sweep_dir}: no such sweep folder")
        asker = Asker(args.sweep_dir, args.host, args.run_id, args.scope, profile_of(candidates[0].id))
        answer = next_step(asker, candidates, args.parallel, args.max_launches)
    except InputError as exc:
        print(f"analysis.search: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
