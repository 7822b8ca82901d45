"""The search over several concurrency levels at once: one launch measures every level.

Concurrency is a client setting, so each launch (one step count) yields a probe at every level,
and each level has an optimum of its own (the best step count falls with load). The search stops
when every level's optimum is known (its bracket closed, with no neighbour within noise left
unexplored) or the launch budget is spent.

Placement is the joint version of `decide._placement`: an exact minimax over the levels'
brackets, where a probe inside several brackets serves them all and an adversary picks each
level's outcome independently. Ranked, as there, by worst-case rounds, then expected rounds and
launches for peaks uniform over each bracket. A level's state is (lo, best, hi), the nearest
measured positions around its best so far, so the joint state is one such triple per level that
is still open; with steps 1..8 and three levels the whole game has a few thousand states.
Noise is handled as `decide` does: a measured edge within noise of a level's best does not close
its bracket, and probes beyond it follow the bracket probes.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from analysis.search.decide import Action, Decision, Pick, Probe, Value, _verdict, _View

EXACT_K = 2  # probes a round placed by exhaustive search; more are added greedily
# Open levels the joint placement models (the widest brackets), by number of candidates: the game
# grows as n^(3 x levels); these keep a cold call under about 5 s at two probes a round.
JOINT_LEVELS = ((10, 3), (14, 2))  # (up to n candidates, levels); more candidates: one level
NOTHING = -1  # a level's best before any launch (positions are 0..n-1)
Triple = tuple[int, int, int]  # (nearest measured below, best, nearest measured above); walls -1, n


@dataclass(frozen=True)
class LevelsDecision:
    """What to do next over all levels, and each level's answer so far (final once done)."""

    action: Action
    reason: str
    picks: tuple[Pick, ...] = ()
    # Per level: best / sure / confidence / close as `decide` reports them; action "done" once the
    # level is settled, "measure" while it still wants probes.
    levels: dict[int, Decision] = field(default_factory=dict)


def _interior(t: Triple) -> range:
    """Positions a level's bracket still holds (its best included: callers skip it)."""
    return range(t[0] + 1, t[2])


def _open(t: Triple) -> bool:
    """Whether the bracket holds an unmeasured position."""
    return any(p != t[1] for p in _interior(t))


@functools.cache
def _outcomes(t: Triple, probes: tuple[int, ...]) -> list[tuple[Triple, float]]:
    """The brackets a level can have after `probes`, with their probability for a peak uniform over
    the bracket: any measured point may turn out best, its measured neighbours bound it."""
    lo, best, hi = t
    inside = [p for p in probes if lo < p < hi and p != best]
    if not inside:
        return [(t, 1.0)]
    known = sorted([*inside, *([best] if best != NOTHING else [])])
    edges = [lo, *known, hi]
    last = len(known) - 1
    width = hi - lo - 1
    out = []
    for i, q in enumerate(known):
        # As decide._value: a peak in an outer gap makes q the winner; in an inner gap, q or its
        # neighbour.
        below = (q - edges[i] - 1) * (1.0 if i == 0 else 0.5)
        above = (edges[i + 2] - q - 1) * (1.0 if i == last else 0.5)
        out.append(((edges[i], q, edges[i + 2]), (1 + below + above) / width))
    return out


def _canonical(states: Sequence[Triple]) -> tuple[Triple, ...]:
    """The open levels' brackets, sorted: levels are interchangeable and settled ones never change."""
    return tuple(sorted(t for t in states if _open(t)))


@functools.cache
def _joint(states: tuple[Triple, ...], k: int) -> tuple[Value, tuple[int, ...]]:
    """Best up-to-k probes for the open brackets `states` (canonical), and their cost."""
    free = sorted({p for t in states for p in _interior(t) if p != t[1]})
    if not free:
        return (0, 0.0, 0.0), ()
    most = min(k, len(free))
    combos = (c for j in range(1, min(most, EXACT_K) + 1) for c in itertools.combinations(free, j))
    best = min(((_joint_value(c, states, k), c) for c in combos), key=lambda option: option[0])
    # More probes a round than EXACT_K: grow the best placement one probe at a time, while a
    # larger one is better (every C(n, k) placement of every joint state costs minutes at k = 4).
    while EXACT_K <= len(best[1]) < most:
        grown = (tuple(sorted((*best[1], p))) for p in free if p not in best[1])
        larger = min(((_joint_value(c, states, k), c) for c in grown), key=lambda option: option[0])
        if larger[0] >= best[0]:
            break
        best = larger
    return best


def _joint_value(probes: tuple[int, ...], states: tuple[Triple, ...], k: int) -> Value:
    """Cost of launching `probes` now: one round, then the worst / expected joint state left."""
    worst, rounds, launches = 0, 0.0, 0.0
    for combo in itertools.product(*(_outcomes(t, probes) for t in states)):
        chance = math.prod(p for _, p in combo)
        sub = _joint(_canonical([t for t, _ in combo]), k)[0]
        worst = max(worst, sub[0])
        rounds += chance * sub[1]
        launches += chance * sub[2]
    # Rounded so that mirror-image placements tie exactly and the first one listed wins.
    return 1 + worst, round(1 + rounds, 9), round(len(probes) + launches, 9)


def _state(view: _View) -> Triple:
    """A level's bracket as the joint placement sees it."""
    if view.best is None:
        return (-1, NOTHING, len(view.steps))
    lo, hi = view.bracket(view.best)
    return (lo, view.best, hi)


def _plan(views: Mapping[int, _View], k: int) -> list[tuple[int, str]]:
    """Up to k (position, reason) to probe next for all levels, most useful first."""
    some = next(iter(views.values()))
    n = len(some.steps)
    states = {c: _state(v) for c, v in views.items()}
    # The widest brackets are modelled (JOINT_LEVELS); a probe in them serves the others too.
    widest = sorted((t for t in states.values() if _open(t)), key=lambda t: (t[0] - t[2], t))
    modelled = next((m for most, m in JOINT_LEVELS if n <= most), 1)
    _, combo = _joint(_canonical(widest[:modelled]), k)
    picks = []
    for p in combo:
        served = [c for c, t in states.items() if t[0] < p < t[2] and p != t[1]]
        if some.best is None:
            why = f"opening probe over {some.span(-1, n)} for concurrency {_names(served)}"
        else:
            where = ", ".join(
                f"c{c} ({views[c].span(states[c][0], states[c][2])} around {views[c].label(states[c][1])})"
                for c in served
            )
            why = f"joint probe of the brackets of {where}"
        picks.append((p, why))
    # Noise: a measured neighbour within noise of a level's best leaves that side open.
    wanted: Counter[int] = Counter()
    for v in views.values():
        if v.best is None:
            continue
        for edge in (e for e in v.bracket(v.best) if 0 <= e < n and v.noise(e)):
            pos = v.beyond(edge)
            if pos is not None:
                wanted[pos] += 1
    taken = {p for p, _ in picks}
    for pos, count in sorted(wanted.items(), key=lambda item: (-item[1], item[0])):
        if pos not in taken:
            picks.append(
                (pos, f"a neighbour within noise of the best at {count} level(s): probing beyond it")
            )
    return picks[:k]


def _names(levels: Sequence[int]) -> str:
    """Concurrency levels as a list: 1, 4, 16."""
    return ", ".join(map(str, levels))


def _level_decision(view: _View, wants: bool, unfinished: bool, budget: int) -> Decision:
    """One level's answer so far, in the single-level Decision's terms."""
    sure, confidence, close = _verdict(view, unfinished, budget)
    b = view.best
    best = None if b is None or view.measured[b].failed else view.steps[b]
    action: Action = "measure" if wants and not unfinished else "done"
    label = "none" if best is None else f"s{best}"
    reason = f"best {label}, {confidence}" if action == "done" else f"best so far {label}, bracket open"
    closes = tuple(view.steps[i] for i in close)
    return Decision(action, reason, best=best, sure=sure, confidence=confidence, close=closes)


def _wants(view: _View) -> bool:
    """Whether a level alone would still probe (its bracket open, or open beyond a noisy edge)."""
    if view.best is None:
        return True
    lo, hi = view.bracket(view.best)
    if hi - lo > 2:
        return True
    return any(view.beyond(e) is not None for e in (lo, hi) if 0 <= e < len(view.steps) and view.noise(e))


def decide_levels(
    candidates: Sequence[int],
    levels: Sequence[int],
    observations: Mapping[int, Mapping[int, Probe]],
    pending: set[int],
    parallel: int,
    max_launches: int | None = None,
) -> LevelsDecision:
    """The next step of the search over `candidates` (step values) at every concurrency level.

    observations: level -> step value -> Probe (a launch gives one at every level; a level whose
    runs gave no number, or no probe, is a failed probe there). pending, parallel and max_launches
    as in `decide`: a pending probe the current plan no longer holds makes the others wait.
    """
    steps = sorted(candidates)
    if not steps or len(set(steps)) != len(steps):
        raise ValueError("candidates must be distinct step values, at least one")
    if not levels or len(set(levels)) != len(levels):
        raise ValueError("levels must be distinct concurrency levels, at least one")
    if parallel < 1:
        raise ValueError("parallel must be at least 1")
    budget = len(steps) if max_launches is None else max_launches
    # A launch is measured at every level: one that left no probe at a level failed there.
    launched = {s for c in levels for s in observations.get(c, {})}
    failed = Probe(failed=True)
    views = {
        c: _View(
            steps, {i: observations.get(c, {}).get(s, failed) for i, s in enumerate(steps) if s in launched}
        )
        for c in sorted(levels)
    }
    measured = set().union(*(v.measured for v in views.values()))
    in_flight = {i for i, s in enumerate(steps) if s in pending and i not in measured}
    plan = _plan(views, parallel)
    room = budget - len(measured) - len(in_flight)
    unfinished = bool(plan) and room <= 0 and not in_flight
    answers = {c: _level_decision(v, _wants(v), unfinished, budget) for c, v in views.items()}
    stale = sorted(in_flight - {p for p, _ in plan})
    free = [(p, why) for p, why in plan if p not in in_flight][: max(room, 0)]
    some = next(iter(views.values()))
    if stale:
        waited = ", ".join(map(some.label, stale))
        reason = f"waiting for {waited} (in flight): its result decides the next probe"
        return LevelsDecision("wait", reason, levels=answers)
    if free:
        picks = tuple(Pick(steps[p], why) for p, why in free)
        return LevelsDecision("measure", picks[0].reason, picks, answers)
    if in_flight:
        return LevelsDecision("wait", "every planned probe is in flight", levels=answers)
    bests = "; ".join(
        f"c{c}: {'none' if a.best is None else f's{a.best}'} ({a.confidence})" for c, a in answers.items()
    )
    return LevelsDecision("done", f"search finished after {len(measured)} launches: {bests}", levels=answers)
