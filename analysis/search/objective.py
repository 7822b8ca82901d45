"""What a probe is judged by: per-repeat decode tok/s from its facts, over the host's baseline.

One launch measures every concurrency level the sweep asked for, so a fact gives samples per
level; the single-level search reads the first level, the multi-level one (analysis.search.levels)
reads them all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from analysis.facts.rows import run_numbers
from analysis.facts.schema import Fact
from analysis.search.decide import Probe


def levels_of(fact: Fact) -> list[int]:
    """The concurrency levels a fact was asked to measure, then any other its runs measured."""
    asked = fact.benchmark.concurrency if fact.benchmark else []
    return list(dict.fromkeys([*asked, *(r.concurrency for r in fact.runs)]))


def level_samples(fact: Fact) -> dict[int, list[float]]:
    """Per-repeat decode tok/s at each level, as the report computes it; [] where none completed.

    Only completed repeats count (the report's medians skip failed runs too); a failed fact has
    none at any level.
    """
    samples: dict[int, list[float]] = {c: [] for c in levels_of(fact)}
    if fact.status != "ok" or fact.failure is not None:
        return samples
    for r in fact.runs:
        x = run_numbers(r)
        if x["run_ok"] and x["decode_tps"] and x["decode_tps"] > 0:
            samples.setdefault(r.concurrency, []).append(x["decode_tps"])
    return samples


def decode_samples(fact: Fact, concurrency: int | None = None) -> list[float]:
    """Per-repeat decode tok/s at one level (default: the fact's first)."""
    levels = levels_of(fact)
    level = concurrency if concurrency is not None else (levels[0] if levels else None)
    return level_samples(fact).get(level, []) if level is not None else []


def probe_of(
    facts: Sequence[Fact], baselines: Mapping[str, float] | None, concurrency: int | None = None
) -> Probe:
    """One candidate's probe at one level (default: each fact's first) from its facts, one per host.

    baselines: median baseline tok/s by host at that level, to divide by; None for raw tok/s. A
    candidate that produced no number on any host is a failed probe.
    """
    samples = [
        s / (baselines[f.host] if baselines else 1.0) for f in facts for s in decode_samples(f, concurrency)
    ]
    return Probe(tuple(samples)) if samples else Probe(failed=True)


def level_probes(
    facts: Sequence[Fact], levels: Sequence[int], baselines: Mapping[int, Mapping[str, float]] | None
) -> dict[int, Probe]:
    """One candidate's probe at every level; baselines: level -> host -> median baseline tok/s."""
    return {c: probe_of(facts, baselines[c] if baselines else None, c) for c in levels}
