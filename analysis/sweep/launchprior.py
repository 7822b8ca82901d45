"""The launch-to-launch spread a sweep's one-launch verdicts allow for: its record and its words.

Read from a host's earlier sweeps at plan time (analysis.running.prior, which hands it to the
plan), held by the host's plan and every fact of it (analysis.facts.schema), and taken by the step
table's verdicts (analysis.report.compare.verdict_ci). Where no history has one, the assumption.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from statistics import NormalDist
from typing import NamedTuple

import msgspec

from analysis.sweep.estimate import t975

# The launch-to-launch spread (CV of a launch's mean tok/s) a verdict allows for where the sweep
# measured no config twice and its host's history had none: measured on the README demo's
# machine (docs/trust-stats.md).
LAUNCH_CV_PRIOR = 0.25


class LaunchPrior(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The CV of a launch's mean tok/s, in %, worth `df` degrees of freedom (None: treated as known)."""

    cv_pct: float
    df: float | None = None
    source: str  # where it came from, in words: earlier sweeps on this host, or the assumption
    from_history: bool  # false: no history on this host/engine/model, the stated assumption
    # How its earlier sweeps' launches went, as (happened, of): sweeps whose finalists made a close
    # call, of those judged at a known spread; later launches racing left out, of those it could.
    # The plan's estimate counts at these odds (analysis.sweep.plan); None: none yet, even odds.
    close_calls: tuple[int, int] | None = None
    raced: tuple[int, int] | None = None


ASSUMED = LaunchPrior(
    cv_pct=LAUNCH_CV_PRIOR * 100.0,
    df=None,
    source="assumed: no earlier sweep of this host, engine and model launched a config twice",
    from_history=False,
)


class LaunchOdds(NamedTuple):
    """The chances the plan's estimate counts launches at: a one-launch decision being a close call
    (its finalists relaunched), racing leaving out a config's later launch; and whence, in words."""

    close_call: float
    raced: float
    words: str


def odds(prior: LaunchPrior | None, span_by: Iterable[str]) -> LaunchOdds:
    """The odds of what moves a host's launch count (`span_by`: "racing", "finalists"), from its
    earlier sweeps where they say (its launch prior), else even."""
    close, raced, said = 0.5, 0.5, []
    if prior and prior.close_calls and "finalists" in span_by:
        happened, of = prior.close_calls
        close = happened / of
        said.append(f"a close call in {happened} of {of} earlier sweep(s)")
    if prior and prior.raced and "racing" in span_by:
        happened, of = prior.raced
        raced = happened / of
        said.append(f"{happened} of {of} later launch(es) raced out before")
    return LaunchOdds(close, raced, f"at this host's odds: {', '.join(said)}" if said else "at even odds")


# A finalist's launches in all: its first and the one more it gets (a close call is relaunched once).
FINALIST_LAUNCHES = 2

# A one-launch decision is a close call, its best and rivals launched once more, where a rival's
# interval against the best holds 0 at this confidence, and where one more launch of each can
# resolve the gap at it: 80%, not the verdicts' 95%. On the seed case (bench/gpu_time.py, docs/
# bench.md) at a 0.5% launch spread the 95% rule spent 7.4 launches per decision for 94.9% right,
# this one 6.9 for 95.1%; at 2% the two are within the bench's noise (6.5 and 6.8, 61%).
FINALIST_CONFIDENCE = 0.80


def narrowing(confidence: float) -> float:
    """What a 95% interval's half-width is multiplied by for a two-sided `confidence` one: the normal
    quantiles' ratio (1.28 / 1.96 at 80%), which the t quantiles' at a history's df stay close to."""
    z = NormalDist().inv_cdf
    return z(0.5 + confidence / 2.0) / z(0.975)


# The baseline again after every this many other launches and at the end, where the setting is not
# given and the host has no launch spread from history (docs/trust.md).
BASELINE_EVERY = 10


def candidates(configs: Iterable[tuple[str, bool]], closing: bool, prior: LaunchPrior | None) -> list[str]:
    """The configs (id, speculative) the finalists are chosen from: the speculative ones; the
    baseline too where the host's history spared it its again-launch (no `closing` launch), so a
    close call it is part of relaunches it as any config."""
    baseline_too = not closing and prior is not None and prior.from_history
    return [cid for cid, speculative in configs if speculative or baseline_too]


def baseline_every(given: int | None, prior: LaunchPrior | None) -> int:
    """The baseline's again-launches a host makes: the setting where given; else none where the
    host's launch spread is from its history (those launches measured it, drift over a sweep
    included, and one more would replace it with this sweep's 1 df), else BASELINE_EVERY."""
    if given is not None:
        return given
    return 0 if prior is not None and prior.from_history else BASELINE_EVERY


def tau2(cv_pct: float) -> float:
    """The variance of a launch's log mean tok/s whose CV is `cv_pct` %."""
    return math.log1p((cv_pct / 100.0) ** 2)


def close_gap_pct(prior: LaunchPrior, launches: int = 1, confidence: float = 0.95) -> float:
    """How far behind the best (%) a rival measured `launches` times on each side is still a close
    call at this spread: the half-width at `confidence` of the log difference of two means over
    that many launches (repeat noise left out). At 1, a one-launch verdict's (95%) or close call's
    (FINALIST_CONFIDENCE); at FINALIST_LAUNCHES and FINALIST_CONFIDENCE, the smallest gap the
    finalists' relaunch can resolve."""
    t = (t975(prior.df) if prior.df else 1.959964) * narrowing(confidence)
    return -math.expm1(-t * math.sqrt(2.0 * tau2(prior.cv_pct) / launches)) * 100.0


def describe(prior: LaunchPrior, speculative: int) -> str:
    """The plan's sentence: the spread, where it came from, and which finalists it relaunches."""
    if not prior.from_history:
        return (
            f"launch spread {prior.cv_pct:.0f}% ({prior.source}): the finalists are the best and every "
            f"config within noise of it (up to {speculative})"
        )
    close = close_gap_pct(prior, 1, FINALIST_CONFIDENCE)
    futile = close_gap_pct(prior, FINALIST_LAUNCHES, FINALIST_CONFIDENCE)
    return (
        f"launch spread {prior.cv_pct:.1f}% from {prior.source}: one launch decides a level where every "
        f"rival is more than about {close:.1f}% behind the best ({FINALIST_CONFIDENCE:.0%}); only the best "
        f"and its rivals of a closer call are launched again (0 to {speculative}), unless the nearest is "
        f"under {futile:.1f}% behind: too close to call at this spread"
    )


def again_words(prior: LaunchPrior, given: int | None, again: int) -> str:
    """The plan's sentence on the baseline's again-launches (`again` of them, by `baseline_every`
    as `given`) and why; empty where the operator chose none."""
    if given is not None:
        return f"the baseline again {again} time(s) (baseline_every={given})" if again else ""
    if prior.from_history:
        return (
            "no baseline-again launch: the host's earlier sweeps measured its launch-to-launch change, "
            f"drift over a sweep included (-e baseline_every={BASELINE_EVERY} launches it)"
        )
    return (
        f"the baseline again {again} time(s), every {BASELINE_EVERY} launches and at the end: the first "
        "measure of this host's launch spread and drift"
    )
