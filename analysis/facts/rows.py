"""Reduce one parsed fact to flat rows: one per run (with its percentiles) and one per request.

Per-run statistics are computed here, in plain Python over each run's few requests, rather than
by exploding every inter-token gap into a DataFrame: a 10,000-fact report would otherwise build
millions of rows only to take two percentiles of each run.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable
from typing import Any

from analysis import metrics
from analysis.facts.schema import Fact, Run
from analysis.sweep.config import COLUMNS

Row = dict[str, Any]
LEVELS = (0.5, 0.9, 0.99)  # the percentiles of each latency: p50, p90, p99
# The figures a run of the fact holds as they are (analysis.metrics): each one's attribute path.
FROM_FACT = [(m.name, tuple(m.field.split("."))) for m in metrics.FROM_FACT if m.field]


def quantiles(values: Iterable[float], *qs: float) -> list[float | None]:
    """Linearly interpolated quantiles (numpy's default method) of one sort; None for no values."""
    # Not statistics.quantiles(method="inclusive"), which cuts at the same points: it computes all
    # 99 percentiles to give two, and needs two values on Python 3.11; parsing facts took 2.5x as long.
    ordered = sorted(values)
    if not ordered:
        return [None] * len(qs)
    last = len(ordered) - 1
    out: list[float | None] = []
    for q in qs:
        pos = last * q
        lo = int(pos)
        hi = min(lo + 1, last)
        out.append(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))
    return out


def step_time_ms(server_info: dict[str, Any], concurrency: int) -> float | None:
    """Median SGLang decode step (draft + verify) in ms at this batch size, if the server kept it."""
    # step_time_dict ({"<batch size>": [seconds, ...]}) exists only when the server ran with
    # SGLANG_RECORD_STEP_TIME=1; it counts since boot, which for a sweep is this config's warm-up
    # and repeats (every config gets a fresh server). Anything malformed reads as not recorded.
    table = server_info.get("step_time_dict")
    times = table.get(str(concurrency)) if isinstance(table, dict) else None
    if not isinstance(times, list):
        return None
    numbers = [t for t in times if type(t) in (int, float)]  # exact types: a bool is no number
    return statistics.median(numbers) * 1000.0 if numbers else None


def _meta(path: str, fact: Fact) -> Row:
    """Columns every row of this fact shares."""
    config = fact.config
    return {
        "path": path,
        "source": "specsweep",
        "sweep_id": fact.sweep_id,
        "host": fact.host,
        "engine": fact.engine.name,
        "engine_version": fact.engine.version,
        "model": fact.engine.model,
        "config_id": config.id,
        **{name: getattr(config, name) for name in COLUMNS},
        "status": fact.status,
        "started_at": fact.timings.started_at,
        "launch_index": fact.launch_index,
        # The launch spread its one-launch verdicts allow (analysis.running.prior; None: assumed).
        "launch_prior_cv_pct": fact.launch_prior.cv_pct if fact.launch_prior else None,
        "launch_prior_df": fact.launch_prior.df if fact.launch_prior else None,
    }


def run_numbers(run: Run) -> Row:
    """Counts and p50 / p90 / p99 of one run; errored requests add no numbers."""
    ok = [q for q in run.requests if q.error is None]
    errors = [q.error for q in run.requests if q.error is not None]
    ttft, ttft_p90, ttft_p99 = quantiles((q.ttft_s for q in ok), *LEVELS)
    per_token = (metrics.tpot_s(q.output_tokens, q.ttft_s, q.e2e_s) for q in ok)
    tpot, tpot_p90, tpot_p99 = quantiles((t for t in per_token if t is not None), *LEVELS)
    e2e, e2e_p90, e2e_p99 = quantiles((q.e2e_s for q in ok), *LEVELS)
    # Gaps between streamed chunks: a speculative step's accepted drafts arrive as a burst, so these
    # are not per-token latencies (their median falls between ~0 and a step) and are named apart.
    gap, gap_p99 = quantiles(itertools.chain.from_iterable(q.itl_s for q in ok), 0.5, 0.99)
    (decode,) = quantiles((q.decode_tps for q in ok if q.decode_tps is not None), 0.5)
    # What a user waits for per token, the first token's wait included (analysis.objectives).
    (user,) = quantiles((q.output_tokens / q.e2e_s for q in ok if q.e2e_s > 0 and q.output_tokens), 0.5)
    n = len(run.requests)
    run_ok = n > 0 and not errors
    return {
        "n_requests": n,
        "n_errors": len(errors),
        "run_ok": run_ok,
        "failed": not run_ok,
        "cause": None if run_ok else ("no_requests" if n == 0 else "request_error"),
        "message": errors[0] if errors else None,
        "decode_tps": decode,
        "user_tps": user,
        "ttft_s": ttft,
        "ttft_p90_s": ttft_p90,
        "ttft_p99_s": ttft_p99,
        "tpot_s": tpot,
        "tpot_p90_s": tpot_p90,
        "tpot_p99_s": tpot_p99,
        "e2e_s": e2e,
        "e2e_p90_s": e2e_p90,
        "e2e_p99_s": e2e_p99,
        "chunk_gap_s": gap,
        "chunk_gap_p99_s": gap_p99,
        "output_tokens": sum(q.output_tokens for q in ok) if ok else None,
    }


def held(run: Run) -> Row:
    """The figures the run holds as they are, by the metric table; None where a part is missing
    (no server_load: the engine gave no count)."""
    out: Row = {}
    for name, path in FROM_FACT:
        value: Any = run
        for part in path:
            value = None if value is None else getattr(value, part)
        out[name] = value
    return out


def run_rows(path: str, fact: Fact) -> list[Row]:
    """One row per run, plus one standing for the fact's failure, skip or missing runs."""
    base = _meta(path, fact)
    # Once per batch size: the recorded step times of a fact are shared by its runs.
    step_ms = {c: step_time_ms(fact.server_info, c) for c in {r.concurrency for r in fact.runs}}
    rows = [
        base
        | run_numbers(r)
        | {
            "run_index": i,
            "concurrency": r.concurrency,
            "repeat": r.repeat,
            "duration_s": r.duration_s,
            # A tuple: one cell of an object column (analysis.report.positions sums them).
            "accepted_histogram": None
            if r.spec.accepted_histogram is None
            else tuple(r.spec.accepted_histogram),
            "step_time_ms": step_ms[r.concurrency],
            "workload": r.workload,
            "interfered": r.interference is not None and r.interference.flagged,
        }
        | held(r)
        for i, r in enumerate(fact.runs)
    ]
    # A failure is data: its own row lets the table count it and show its cause. Without a
    # concurrency compare.spread_failures places it in every level the sweep measured; a benchmark
    # that stopped at one level (its server died) fails there, its earlier levels' runs kept.
    if fact.status != "ok" or not fact.runs:
        f = fact.failure
        cause = f.cause if f else ("skipped" if fact.status == "skipped" else "no_runs")
        rows.append(
            base
            | {
                "run_ok": False,
                "failed": fact.status != "skipped",
                "cause": cause,
                "message": f.message if f else None,
            }
            | ({"concurrency": f.concurrency} if f and f.concurrency is not None else {})
        )
    return rows


def request_columns(path: str, fact: Fact) -> dict[str, list[Any]]:
    """Every request of every run, one list per column (texts kept for the output-equivalence check).

    Columns, not a dict per request: a cold report has a hundred thousand requests, and the frame
    is built from lists faster than from as many dicts.
    """
    runs = [(i, r) for i, r in enumerate(fact.runs) for _ in r.requests]
    requests = [q for r in fact.runs for q in r.requests]
    n = len(requests)
    return {
        "path": [path] * n,
        "run_index": [i for i, _ in runs],
        "sweep_id": [fact.sweep_id] * n,
        "host": [fact.host] * n,
        "engine": [fact.engine.name] * n,
        "model": [fact.engine.model] * n,
        "config_id": [fact.config.id] * n,
        "concurrency": [r.concurrency for _, r in runs],
        "workload": [r.workload for _, r in runs],
        "repeat": [r.repeat for _, r in runs],
        "prompt_id": [q.prompt_id for q in requests],
        "output_tokens": [q.output_tokens for q in requests],
        "ttft_s": [q.ttft_s for q in requests],
        "e2e_s": [q.e2e_s for q in requests],
        "decode_tps": [q.decode_tps for q in requests],
        "text": [q.text for q in requests],
        "error": [q.error for q in requests],
    }
