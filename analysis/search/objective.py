"""What a probe is judged by: per-repeat decode tok/s from its facts, over the host's baseline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from analysis.facts.rows import run_numbers
from analysis.facts.schema import Fact
from analysis.search.decide import Probe


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
