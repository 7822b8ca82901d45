"""The metric table: every figure a run is measured by, declared once.

A metric's line says what it is (name, unit, which way is better), how one run gets it, how a load
level's repeats aggregate into the step table's cell, that column's name, and where SGLang's
bench_serving JSONL holds it. Every reader goes by these lines: the run rows
(analysis.facts.rows reads `field` off each run), the loader's columns and dtypes
(analysis.facts.load), SGLang's JSONL (analysis.facts.jsonl), the step table's aggregation and
columns (analysis.report.compare), the terminal table (analysis.report.render), the objectives
(analysis.objectives) and the reference in docs/results.md (`python -m analysis metrics --write
docs/results.md`; a test keeps it true). Adding a figure the fact already holds is one line here
and the regenerated reference (docs/extending.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Better = Literal["higher", "lower"]
# How a level's repeats make one cell (a pandas aggregation): only repeats that completed count.
Aggregate = Literal["median", "mean", "max", "min", "sum"]


@dataclass(frozen=True)
class Metric:
    """One figure of a run, and of a load level in the step table where it has a column."""

    name: str  # the run row's column (and the fact's figure's name in the reports)
    unit: str  # of the run row's value
    better: Better | None  # None: neither way (a count, how much load there was)
    per_run: str  # how one run (one repeat of one level) gets it, in words
    says: str  # what it is, for the reference and the legend
    # Where a run of the fact holds it, a path of attributes on analysis.facts.schema.Run; None:
    # computed (from the run's requests by analysis.facts.rows, or by the report where row=False).
    field: str | None = None
    row: bool = True  # a column of the run rows; False: the report computes it from them
    per_level: Aggregate | None = None  # over a level's repeats into the step table; None: no column
    column: str | None = None  # the step table's column (None: the run row's name)
    scale: float = 1.0  # the step table's value per unit of the run row's (1000: seconds as ms)
    # The step-table column it follows (None: the table's end); the report's own columns sit between.
    after: str | None = None
    header: str | None = None  # a terminal-table column of its own, headed so (None: CSV / JSON only)
    fmt: str = ".1f"  # how the terminal table prints it
    integer: bool = False  # a count: the rows hold it as a nullable integer
    bench_serving: str | None = None  # the field of SGLang's bench_serving JSONL holding it

    @property
    def level_column(self) -> str:
        """The step table's column of this metric."""
        return self.column or self.name

    @property
    def level_unit(self) -> str:
        """The unit of the step table's column."""
        return "ms" if self.unit == "s" and self.scale == 1000.0 else self.unit


def _latency(name: str, what: str, q: str, *, serving: str | None = None, after: str) -> Metric:
    """One percentile of one per-request latency over a run's requests (rows.run_numbers)."""
    stem = name.removesuffix("_s").removesuffix(f"_{q}")
    return Metric(
        name, "s", "lower", f"{q} over the run's requests", what, per_level="median",
        column=f"{stem}_{q}_ms", scale=1000.0, after=after, bench_serving=serving,
    )  # fmt: skip


TTFT = "time to first token: send to the first streamed text"
TPOT = "per-token latency: (e2e - TTFT) / (output tokens - 1) of a request"
E2E = "end-to-end latency: send to the last token"
GAP = "gap between streamed chunks (a speculative step's drafts arrive as one burst): not per token"

METRICS: tuple[Metric, ...] = (
    Metric(
        "decode_tps", "tok/s", "higher", "median over the run's requests",
        "one request's decode speed: tokens after the first over the time after the first",
        per_level="median", after="engine_version", header="tok/s/req",
    ),
    Metric(
        "accept_length", "tokens", "higher", "the engine's count over the run",
        "tokens per verify step (accepted drafts + 1)",
        field="spec.accept_length", per_level="mean", after="tie_best", header="accept len", fmt=".2f",
        bench_serving="accept_length",
    ),
    _latency("ttft_s", TTFT, "p50", serving="median_ttft_ms", after="accept_length"),
    _latency("ttft_p90_s", TTFT, "p90", after="ttft_p50_ms"),
    _latency("ttft_p99_s", TTFT, "p99", serving="p99_ttft_ms", after="ttft_p90_ms"),
    _latency("tpot_s", TPOT, "p50", serving="median_tpot_ms", after="ttft_p99_ms"),
    _latency("tpot_p90_s", TPOT, "p90", after="tpot_p50_ms"),
    _latency("tpot_p99_s", TPOT, "p99", serving="p99_tpot_ms", after="tpot_p90_ms"),
    _latency("e2e_s", E2E, "p50", serving="median_e2e_latency_ms", after="tpot_p99_ms"),
    _latency("e2e_p90_s", E2E, "p90", after="e2e_p50_ms"),
    _latency("e2e_p99_s", E2E, "p99", serving="p99_e2e_latency_ms", after="e2e_p90_ms"),
    _latency("chunk_gap_s", GAP, "p50", after="e2e_p99_ms"),
    _latency("chunk_gap_p99_s", GAP, "p99", after="chunk_gap_p50_ms"),
    Metric(
        "step_time_ms", "ms", "lower", "median of SGLang's recorded decode steps at the run's batch size",
        "one decode step, draft + verify (SGLANG_RECORD_STEP_TIME=1)",
        per_level="median", column="step_ms", after="chunk_gap_p99_ms", header="step ms",
    ),
    Metric(
        "user_tps", "tok/s", "higher", "median over the run's requests",
        "what a user waits for per token: a request's output tokens / its e2e latency",
        per_level="median", after="score",
    ),
    Metric(
        "total_tps", "tok/s", "higher", "output tokens generated in the measured window / its length",
        "throughput: every request's output tokens over the measured window",
        row=False, per_level="median", after="se_df", header="total tok/s",
    ),
    Metric(
        "achieved_concurrency", "requests", None, "time-weighted mean over the measured window",
        "requests in flight as the client sent them",
        field="achieved_concurrency", per_level="mean", after="drifting",
    ),
    Metric(
        "server_running", "requests", None, "mean of the server's samples in the window",
        "requests the server ran (its own metrics)",
        field="server_load.running_mean", per_level="mean", after="level_reached",
    ),
    Metric(
        "server_queued", "requests", "lower", "mean of the server's samples in the window",
        "requests waiting in the server's queue (the largest repeat's mean)",
        field="server_load.queued_mean", per_level="max", after="server_running",
    ),
    Metric(
        "server_queued_max", "requests", "lower", "most in one of the server's samples",
        "requests waiting in the server's queue at most",
        field="server_load.queued_max", per_level="max", after="server_queued",
    ),
    Metric(
        "server_running_max", "requests", None, "most in one of the server's samples",
        "requests the server ran at once at most: its cap (SGLang's max running requests, -np slots)",
        field="server_load.running_max", per_level="max", after="server_queued_max",
    ),
    Metric(
        "goodput_rps", "req/s", "higher", "requests completed within the SLOs / the run's duration",
        "goodput: requests per second within the SLOs (SGLang's definition; needs an SLA)",
        row=False,
    ),
    Metric(
        "output_tokens", "tokens", None, "sum over the run's completed requests",
        "output tokens of the completed requests", integer=True, bench_serving="total_output_tokens",
    ),
    Metric(
        "accept_rate", "fraction", "higher", "the engine's count over the run",
        "drafts accepted / drafts proposed", field="spec.accept_rate",
    ),
    Metric("drafted", "tokens", None, "the engine's count over the run", "draft tokens proposed",
           field="spec.drafted", integer=True),
    Metric("accepted", "tokens", None, "the engine's count over the run", "draft tokens accepted",
           field="spec.accepted", integer=True),
    Metric("verify_steps", "steps", None, "the engine's count over the run", "verify steps (forward passes)",
           field="spec.verify_steps", integer=True),
    Metric(
        "window_output_tokens", "tokens", None, "inside the window, a straddling request by its share",
        "output tokens generated inside the measured window", field="window_output_tokens",
    ),
    Metric(
        "window_requests", "requests", None, "inside the window, a straddling request by its share",
        "requests served inside the measured window", field="window_requests",
    ),
)  # fmt: skip
BY_NAME = {m.name: m for m in METRICS}
ROWS = tuple(m for m in METRICS if m.row)  # the run rows' figures
FROM_FACT = tuple(m for m in ROWS if m.field)  # read off each run of the fact as they are
LEVEL = tuple(m for m in METRICS if m.per_level)  # the step table's figures


def tpot_s(output_tokens: int, ttft_s: float, e2e_s: float) -> float | None:
    """Per-token latency of one request (TPOT above): (e2e - TTFT) / (output tokens - 1), vLLM bench's
    TPOT and AIPerf's inter-token latency; None below two tokens (docs/results.md)."""
    return (e2e_s - ttft_s) / (output_tokens - 1) if output_tokens > 1 else None


def get(name: str) -> Metric:
    """The metric of that name; KeyError naming the known ones."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no metric {name!r}; known: {', '.join(BY_NAME)}") from None


def place(own: list[str]) -> list[str]:
    """The step table's columns: the report's `own` ones with each metric's column after the one it
    names (in table order, so one may follow another), or at the end."""
    out = list(own)
    for m in LEVEL:
        out.insert(out.index(m.after) + 1 if m.after else len(out), m.level_column)
    return out
