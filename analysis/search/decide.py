"""The search's pure core: observations in, the next probes (or wait / done) out.

Probes are placed by an exact minimax over the bracket around the best measured point: for one
probe a round that is the integer Fibonacci search, for k hosts it is a (k+1)-section search that
reuses the measured point; the worst case is therefore proven by exhaustive tests, not argued.
Noise: two probes are compared with a 95% Welch t-interval on log samples, as the report's speedup
intervals are. A measured neighbour within noise of the best does not close the bracket on its
side: the search probes beyond it, and the answer names it instead of claiming a winner.

Several concurrency levels measured by the same launches: analysis.search.levels, the joint
version of this placement (it reuses _View, _verdict and the cost model of _value).
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from analysis.tquantiles import KNOTS as _T_KNOTS

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
