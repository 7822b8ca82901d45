"""Per-token latency on a captured speculative stream: TPOT, not the median gap between chunks.

fixtures/facts/h200-ngram holds s2 (two n-gram draft tokens per step) as an NVIDIA H200 measured it
(CUDA llama.cpp, the demo's model, c = 1, 4, 16): accepted drafts arrive in bursts, so most gaps
between streamed chunks are under a millisecond and their median says nothing of a token's latency.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from analysis.facts.load import load_sweeps
from analysis.report.cli import build_tables
from analysis.report.render import render

SWEEP = Path(__file__).parent / "fixtures" / "facts" / "h200-ngram"


def per_request_tpot_ms() -> dict[int, float]:
    """Per level, straight from the fact's JSON: each repeat's median of (e2e - TTFT) / (tokens - 1),
    then the median over repeats (how every figure of a level is made)."""
    fact = json.loads((SWEEP / "localhost" / "s2.json").read_text())
    by_level: dict[int, list[float]] = {}
    for run in fact["runs"]:
        ok = [q for q in run["requests"] if q["error"] is None and q["output_tokens"] > 1]
        tpot = statistics.median((q["e2e_s"] - q["ttft_s"]) / (q["output_tokens"] - 1) for q in ok)
        by_level.setdefault(run["concurrency"], []).append(tpot * 1000.0)
    return {c: statistics.median(v) for c, v in by_level.items()}


def test_per_token_latency_of_a_bursty_speculative_stream_is_tpot_not_the_chunk_gap() -> None:
    tables = build_tables(load_sweeps([SWEEP], use_cache=False))
    step = tables.step.set_index("concurrency")
    expected = per_request_tpot_ms()
    assert sorted(expected) == [1, 4, 16]
    for level, tpot in expected.items():
        row = step.loc[level]
        assert row["tpot_p50_ms"] == pytest.approx(tpot, rel=0.05), (level, row["tpot_p50_ms"], tpot)
        # What the table called "ITL p50" before: the median chunk gap, a small fraction of it.
        assert row["chunk_gap_p50_ms"] < 0.1 * tpot, (level, row["chunk_gap_p50_ms"], tpot)
        assert row["tpot_p50_ms"] <= row["tpot_p99_ms"] and row["e2e_p50_ms"] > row["ttft_p50_ms"]
    # The text table shows the per-token latency and names no chunk gap as ITL.
    text = render(tables, "text")
    header = next(line for line in text.splitlines() if "config" in line and "TPOT p50/p99 ms" in line)
    assert "ITL" not in text, header
    s2 = next(line for line in text.splitlines() if line.split()[:1] == ["s2"] or line.split()[1:2] == ["s2"])
    assert f"{step.loc[1, 'tpot_p50_ms']:.1f}/" in s2, s2
