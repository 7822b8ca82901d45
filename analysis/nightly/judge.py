"""One cell's verdict from its nights: the tok/s rules, the acceptance-collapse gate, attribution.

Decode speed is accept length x verify steps per second, so a tok/s change splits into an
acceptance change (draft model, prompts, tokenizer) and a step-time change (kernels, NCCL,
driver), which have different owners. A verdict that moved tok/s compares the nights before the
change with those after it on both: the component that carries at least half of the tok/s change
is named, `both` when each moved its harmful way with Student's t p <= ATTRIBUTION_ALPHA, `none`
when neither carries half (time lost outside the verify step, which only an engine-recorded step
time can show; with a derived one the two always add up to the whole change). The same split
helps find a drop: one carried by a factor stands against that factor's noise alone
(recent_drop).

Works on arrays (oldest night first, the judged night last) so that `regress` and the benchmark
(bench/regress.py) run the same code.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from analysis.nightly.changepoint import Comparison, change_points, ttest
from analysis.nightly.noise import NO_PRIOR, Prior, fit
from analysis.nightly.settings import MIN_NIGHTS, RECENT_NIGHTS, Settings

# Below this many nights a one-night segment has under 4 degrees of freedom (a 3x drop on noisy
# nights can miss p <= alpha), so the window rule can still fail a cell the change-point rule passes.
YOUNG_NIGHTS = 6
# `both` needs each component's change to stand on its own: 1% keeps the one that did not move
# out of the answer 99 times in 100 (the split was found on tok/s, not searched for again).
ATTRIBUTION_ALPHA = 0.01
VERDICTS = ("regressed", "failed", "improved", "unchanged", "new", "missing", "version_changed")
FAILING = ("regressed", "failed")
COMPONENTS = ("acceptance", "step_time", "both", "none")
# The series the recent-drop test reads, tok/s and its two factors, each with the sign of a move
# that costs tok/s. A drop carried by one factor stands out against that factor's noise alone,
# which is less than tok/s's when the two factors' noises are independent.
HARMFUL = {"tps": -1.0, "accept": -1.0, "step": 1.0}
Priors = Mapping[str, Prior]  # the fleet's noise per series of HARMFUL
NO_PRIORS: Priors = MappingProxyType({})


@dataclass(frozen=True)
class Nights:
    """One cell's nights, oldest first; the last is the night being judged."""

    tps: np.ndarray  # median decode tok/s (nan: the config failed that night)
    accept: np.ndarray  # median accept length (nan: not speculative, or not recorded)
    step_engine: np.ndarray  # the engine's own median step time, ms (nan: not recorded)
    step_derived: np.ndarray  # accept length / decode tok/s (mean ITL x accept length), ms
    same_version: np.ndarray  # the night ran the judged night's engine version


@dataclass(frozen=True)
class Window:
    """The window rule: the latest night against the median of the previous same-version nights."""

    verdict: str
    baseline: float
    nights: int
    change: float  # latest / baseline - 1
    band: float  # mad_k x MAD, tok/s


@dataclass(frozen=True)
class Verdict:
    """What happened to one cell, which rule says so, since when, by how much and why."""

    verdict: str  # one of VERDICTS (`missing` is for cells a night did not measure, not judged here)
    rule: str | None = None  # change_point, recent_drop, window or accept_gate
    component: str = "none"  # one of COMPONENTS
    changed_at: int | None = None  # index of the first night of the new segment
    tps: Comparison | None = None  # log tok/s, the nights before the change against those after
    accept: Comparison | None = None
    step: Comparison | None = None
    step_source: str | None = None  # engine or derived
    window: Window | None = None
    nights_before: int | None = None  # how many nights the `tps` test's "before" side has


def trailing_run(mask: np.ndarray) -> int:
    """Index of the first element of the run of True values that ends the array."""
    false = np.flatnonzero(~mask)
    return int(false[-1]) + 1 if len(false) else 0


def window_rule(tps: np.ndarray, before: np.ndarray, s: Settings) -> Window | None:
    """The latest night (tps[-1]) against the nights `before`; None without any."""
    if not len(before):
        return None
    baseline = float(np.median(tps[before]))
    band = s.mad_k * float(np.median(np.abs(tps[before] - baseline)))
    delta = float(tps[-1]) - baseline
    beyond = abs(delta) > s.threshold * baseline
    verdict = "unchanged"
    if beyond and abs(delta) > band:
        verdict = "regressed" if delta < 0 else "improved"
    return Window(verdict, baseline, len(before), delta / baseline, band)


def _compare(values: np.ndarray, before: np.ndarray, after: np.ndarray) -> Comparison | None:
    """Student's t test of log values at two sets of nights; None when a side has none."""
    left, right = values[before], values[after]
    left, right = left[np.isfinite(left)], right[np.isfinite(right)]
    return ttest(np.log(left), np.log(right)) if len(left) and len(right) else None


def _moved(test: Comparison | None, sign: float) -> float:
    """A component's log change in the direction `sign` (+1: up); 0 without a test."""
    return 0.0 if test is None else sign * (test.mean_after - test.mean_before)


def _significant(test: Comparison | None, sign: float) -> bool:
    """Whether a component changed in the direction `sign` with p <= ATTRIBUTION_ALPHA."""
    return test is not None and test.p_value <= ATTRIBUTION_ALPHA and _moved(test, sign) > 0


def attribute(tests: list[Comparison | None], sign: float, gate: bool) -> str:
    """acceptance, step_time, both or none: what moved tok/s (tests: tok/s, accept, step time)."""
    tps, accept, step = tests
    if gate:
        return "both" if _significant(step, -sign) else "acceptance"
    if _significant(accept, sign) and _significant(step, -sign):
        return "both"
    # log tok/s = log accept length - log step time (+ what happens outside the verify step): the
    # component that carries at least half of the tok/s change in the verdict's direction.
    shares = {"acceptance": _moved(accept, sign), "step_time": _moved(step, -sign)}
    best = max(shares, key=lambda name: shares[name])
    total = _moved(tps, sign)
    return best if total > 0 and shares[best] >= total / 2 else "none"


def _accept_gate(n: Nights, measured: np.ndarray, s: Settings) -> int | None:
    """Where the acceptance collapse the gate sees began, or None when it sees none."""
    accept = n.accept
    if not measured[-1] or not np.isfinite(accept[-1]):
        return None
    if accept[-1] < s.min_accept_length:
        return trailing_run(accept < s.min_accept_length)
    earlier = accept[:-1][measured[:-1] & np.isfinite(accept[:-1])][-s.window :]
    if len(earlier) and accept[-1] < (1.0 - s.accept_drop) * float(np.median(earlier)):
        return len(accept) - 1
    return None


Split = tuple[str, str, np.ndarray, np.ndarray]  # verdict, rule, nights before, nights after


def recent_drop(
    logs: Mapping[str, np.ndarray], start: int, s: Settings, priors: Priors = NO_PRIORS
) -> int | None:
    """Where the drop that the recent-drop rule sees in logs["tps"][start:] began, or None.

    `logs`: log tok/s and those of its factors (HARMFUL) measured on the same nights. The last k
    nights (each k of RECENT_NIGHTS) against those before them: a tok/s drop of at least min_change
    with a one-sided p at most recent_alpha, shared out among the series tested (Bonferroni), in
    tok/s or in a factor that carries at least half of the drop (a factor whose noise is near zero
    must not turn a noisy tok/s into a regression with a move too small to matter). Each series'
    variance is moderated by the fleet's (`priors`); the smallest p decides. The drop begins at the
    first of those k nights nearer the new level of the series that decided.
    """
    tps, level = logs["tps"], s.recent_alpha / len(logs)
    found: tuple[float, int, str, Comparison] | None = None
    for k in RECENT_NIGHTS:
        if len(tps) - k - start < MIN_NIGHTS:
            continue
        drop = float(tps[start:-k].mean() - tps[-k:].mean())
        if math.expm1(drop) < s.min_change:
            continue
        for name, series in logs.items():
            test = ttest(series[start:-k], series[-k:], priors.get(name, NO_PRIOR))
            p = test.p_value / 2.0
            carries = HARMFUL[name] * (test.mean_after - test.mean_before) >= drop / 2.0
            if carries and p <= level and (found is None or p < found[0]):
                found = (p, k, name, test)
    if found is None:
        return None
    _, k, name, test = found
    # Their mean is beyond the middle, so at least one of them is.
    nearer_new = HARMFUL[name] * (logs[name][-k:] - (test.mean_before + test.mean_after) / 2.0) > 0
    return len(tps) - k + int(np.argmax(nearer_new))


def _positions(n: Nights, s: Settings) -> np.ndarray:
    """The measured nights the rules read: the last `s.nights` of them."""
    return np.flatnonzero(np.isfinite(n.tps))[-s.nights :]


def _step(n: Nights, positions: np.ndarray) -> tuple[np.ndarray, str]:
    """The step times the rules read at `positions`: the engine's where it recorded every one."""
    engine = bool(np.isfinite(n.step_engine[positions]).all())
    return (n.step_engine, "engine") if engine else (n.step_derived, "derived")


def _logs(n: Nights, positions: np.ndarray) -> dict[str, np.ndarray]:
    """Log tok/s at `positions` and, for a speculative cell whose accept length and step time were
    measured on all of them, of its two factors (without speculation the derived step time is only
    1 / tok/s: nothing more to test)."""
    logs = {"tps": np.log(n.tps[positions])}
    step, _ = _step(n, positions)
    factors = {"accept": n.accept[positions], "step": step[positions]}
    if all(np.isfinite(x).all() and (x > 0).all() for x in factors.values()):
        logs |= {name: np.log(x) for name, x in factors.items()}
    return logs


def cell_noise(n: Nights, s: Settings) -> dict[str, tuple[float, float]]:
    """The cell's night-to-night variance of each log series (HARMFUL) and its degrees of freedom,
    within the segments between the change points of tok/s."""
    positions = _positions(n, s)
    if len(positions) < MIN_NIGHTS:
        return {}
    logs = _logs(n, positions)
    ends = [0, *(c.index for c in change_points(logs["tps"], s.alpha, s.min_change)), len(positions)]
    df = float(len(positions) - len(ends) + 1)
    if not df:
        return {}

    def within(x: np.ndarray) -> float:
        """Variance around each segment's own mean."""
        return sum(float(((x[a:b] - x[a:b].mean()) ** 2).sum()) for a, b in itertools.pairwise(ends)) / df

    return {name: (within(x), df) for name, x in logs.items()}


def fleet_noise(cells: list[Nights], s: Settings) -> Priors:
    """The noise prior per series that cells judged together share (analysis.nightly.noise); none
    when `s.noise` is own."""
    if s.noise == "own":
        return NO_PRIORS
    spread = [cell_noise(n, s) for n in cells]
    return {name: fit(*np.array([own.get(name, (math.nan, 0.0)) for own in spread]).reshape(-1, 2).T)
            for name in HARMFUL}  # fmt: skip


def _tps_rule(
    n: Nights, positions: np.ndarray, window: Split | None, s: Settings, priors: Priors
) -> Split | None:
    """What the tok/s rules say, per `s.rule`; None when neither can compare anything."""
    none = positions[:0]
    if s.rule == "window" or len(positions) < MIN_NIGHTS:
        return window
    logs = _logs(n, positions)
    changes = change_points(logs["tps"], s.alpha, s.min_change)
    found: Split = ("unchanged", "change_point", none, none)
    if changes and len(positions) - changes[-1].index <= s.window:
        c = changes[-1]
        verdict = "regressed" if c.test.ratio < 1.0 else "improved"
        found = (verdict, "change_point", positions[c.start : c.index], positions[c.index :])
    if found[0] != "regressed":
        start = max([c.index for c in changes if c.index <= len(positions) - min(RECENT_NIGHTS)], default=0)
        if (index := recent_drop(logs, start, s, priors)) is not None:
            found = ("regressed", "recent_drop", positions[start:index], positions[index:])
    window_only_fails = window is not None and window[0] == "regressed" and found[0] != "regressed"
    return window if window_only_fails and (s.rule == "either" or len(positions) < YOUNG_NIGHTS) else found


def judge(n: Nights, s: Settings, priors: Priors = NO_PRIORS) -> Verdict:
    """The verdict of the last night of `n`; `priors`: the fleet's noise (fleet_noise)."""
    measured = np.isfinite(n.tps)
    if not measured[:-1].any():
        return Verdict("new")
    if not measured[-1]:
        return Verdict("failed", changed_at=trailing_run(~measured))
    positions = _positions(n, s)
    previous = positions[:-1][n.same_version[positions[:-1]]][-s.window :]
    window = window_rule(n.tps, previous, s)
    by_window = None if window is None else (window.verdict, "window", previous, positions[-1:])
    ruled = _tps_rule(n, positions, by_window, s, priors)
    gate = _accept_gate(n, measured, s)
    if ruled is None and gate is None:
        return Verdict("version_changed", window=window)
    verdict, rule, before, after = ruled or ("unchanged", "window", positions[:0], positions[:0])
    if gate is not None and verdict != "regressed":
        verdict, rule = "regressed", "accept_gate"
        before, after = positions[positions < gate][-s.window :], positions[positions >= gate]
    if not len(after):
        return Verdict(verdict, rule, window=window)
    step, step_source = _step(n, positions)
    tests = [_compare(values, before, after) for values in (n.tps, n.accept, step)]
    return Verdict(
        verdict,
        rule,
        component=attribute(tests, -1.0 if verdict == "regressed" else 1.0, gate is not None),
        changed_at=int(after[0]),
        tps=tests[0],
        accept=tests[1],
        step=tests[2],
        step_source=step_source,
        window=window,
        nights_before=len(before),
    )
