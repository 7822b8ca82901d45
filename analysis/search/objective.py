"""What a probe is judged by: per-repeat values of the sweep's objective (analysis.objectives;
goodput counts the requests within the sweep's SLOs; as the report computes them) from its facts,
over the host's baseline.

One launch measures every concurrency level the sweep asked for, so a fact gives samples per
level; the single-level search reads the first level, the multi-level one (analysis.search.levels)
reads them all. A launch that measured several workloads is judged on the operator's mix of them,
by the rule `recommend --mix` uses (analysis.report.mix.rates), not on whichever workload ran.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from analysis import objectives
from analysis.facts.schema import Fact
from analysis.objectives import Objective
from analysis.report import mix
from analysis.report.sla import Sla, run_values
from analysis.search.decide import Probe

Shares = Mapping[str, float]  # the traffic's share of requests by workload (analysis.sweep.mix.parse)


def levels_of(fact: Fact) -> list[int]:
    """The concurrency levels a fact was asked to measure, then any other its runs measured."""
    asked = fact.benchmark.concurrency if fact.benchmark else []
    return list(dict.fromkeys([*asked, *(r.concurrency for r in fact.runs)]))


def level_samples(
    fact: Fact,
    shares: Shares | None = None,
    objective: Objective = objectives.DEFAULT,
    sla: Sla | None = None,
) -> dict[int, list[float]]:
    """Per-repeat values of the objective at each level, as the report computes them; [] where none
    completed.

    Only completed repeats count (the report's medians skip failed runs too); a failed fact has
    none at any level. A value of 0 gives no sample (probes are compared as logs): a goodput repeat
    with no request within the SLOs, so a config with none in any repeat is a failed probe.

    Runs naming workloads give one sample per (level, repeat): the mix's rate over that repeat of
    each workload, weighed by `shares` (default: equal shares of the workloads measured, as
    `recommend`); a repeat missing one of the mix's workloads gives none.
    """
    samples: dict[int, list[float]] = {c: [] for c in levels_of(fact)}
    if fact.status != "ok" or fact.failure is not None:
        return samples
    values = zip(fact.runs, run_values(fact.runs, objective, sla), strict=True)
    rows = pd.DataFrame(
        [(r.concurrency, r.repeat, r.workload, v) for r, v in values if v and v > 0],
        columns=["concurrency", "repeat", "workload", "rate"],
    )
    named = rows[rows["workload"].notna()]
    if not named.empty:
        measured = sorted(set(named["workload"]))
        weights = shares or {w: 1.0 / len(measured) for w in measured}
        rows = mix.rates(named, weights, ["concurrency", "repeat"]).dropna().rename("rate").reset_index()
    for level, group in rows.groupby("concurrency", sort=False):
        samples.setdefault(int(level), []).extend(group["rate"].tolist())
    return samples


def decode_samples(
    fact: Fact,
    concurrency: int | None = None,
    shares: Shares | None = None,
    objective: Objective = objectives.DEFAULT,
    sla: Sla | None = None,
) -> list[float]:
    """Per-repeat values of the objective at one level (default: the fact's first)."""
    levels = levels_of(fact)
    level = concurrency if concurrency is not None else (levels[0] if levels else None)
    return level_samples(fact, shares, objective, sla).get(level, []) if level is not None else []


def probe_of(
    facts: Sequence[Fact],
    baselines: Mapping[str, float] | None,
    concurrency: int | None = None,
    shares: Shares | None = None,
    objective: Objective = objectives.DEFAULT,
    sla: Sla | None = None,
) -> Probe:
    """One candidate's probe at one level (default: each fact's first) from its facts, one per host.

    baselines: median baseline tok/s by host at that level, to divide by; None for raw tok/s. A
    candidate that produced no number on any host is a failed probe.
    """
    samples = [
        s / (baselines[f.host] if baselines else 1.0)
        for f in facts
        for s in decode_samples(f, concurrency, shares, objective, sla)
    ]
    return Probe(tuple(samples)) if samples else Probe(failed=True)


def level_probes(
    facts: Sequence[Fact],
    levels: Sequence[int],
    baselines: Mapping[int, Mapping[str, float]] | None,
    shares: Shares | None = None,
    objective: Objective = objectives.DEFAULT,
    sla: Sla | None = None,
) -> dict[int, Probe]:
    """One candidate's probe at every level; baselines: level -> host -> median baseline tok/s."""
    return {
        c: probe_of(facts, baselines[c] if baselines else None, c, shares, objective, sla) for c in levels
    }
