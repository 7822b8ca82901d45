"""What "faster" means: the objective the operator ranks configs on (`-e objective=`, `--objective`).

Each is a metric of the metric table (analysis.metrics: its column, unit and direction). Every
ranking reads it from here: the step table's speedup, verdict and best, `recommend`, the
adaptive schedule, racing, the step search, the nightly's regressions and the deploy gate. Each
objective is a rate, higher is better, measured per repeat (the step table's statistics take its
log, as they took decode tok/s's):

- throughput: total output tokens per second of the level, every request's tokens over the
  measured window (analysis.report.compare.total_tps). What a deployment serves per GPU-second.
- per_user: a request's output tokens / its end-to-end latency, TTFT included, median over a
  repeat's requests. What a user waits for: the first token's wait and the streaming after it.
  Not decode tok/s alone (tokens after the first / the time after it, the table's per-request
  speed): at concurrency 4 a speculative config can stream each request a third slower and still
  answer sooner, its requests queueing half as long for their first token (issue 40). In a closed
  loop that holds its level, per_user ranks as throughput does (Little's law: c requests in flight
  make total = c x tokens / e2e); they part in an open loop (`request_rate`), where every config
  that keeps up serves the same throughput and per_user says which serves each request sooner.
- goodput: requests per second that succeeded within the SLOs (`sla_ttft_p99_ms`, `sla_itl_p99_ms`;
  SGLang's definition, analysis.report.sla), so it needs at least one of them.

The default is throughput: it needs no SLA, it is what the fleet pays for, and at concurrency 1
(one request at a time) it is the one user's speed as well.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from analysis import metrics


@dataclass(frozen=True)
class Objective:
    """One way to rank configs: its name and the metric it ranks on (higher is better)."""

    name: str
    metric: metrics.Metric
    says: str  # what the number is, in a few words, for legends and notes
    needs_sla: bool = False

    @property
    def column(self) -> str:
        """The step-table and run-row column holding it."""
        return self.metric.name

    @property
    def unit(self) -> str:
        """Its unit."""
        return self.metric.unit

    def label(self) -> str:
        """`throughput (total tok/s)`: the name and what it counts, for a heading or a sentence."""
        return f"{self.name} ({self.says})"


THROUGHPUT = Objective("throughput", metrics.get("total_tps"), "total output tok/s")
PER_USER = Objective("per_user", metrics.get("user_tps"), "a request's output tokens / its e2e latency")
GOODPUT = Objective("goodput", metrics.get("goodput_rps"), "requests/s within the SLOs", needs_sla=True)
OBJECTIVES = {o.name: o for o in (THROUGHPUT, PER_USER, GOODPUT)}
NAMES = tuple(OBJECTIVES)
DEFAULT = THROUGHPUT
WHY_DEFAULT = (
    "the default: it needs no SLA, it is what the fleet serves, and at concurrency 1 it is the one "
    "user's speed too"
)


class ObjectiveError(ValueError):
    """An objective that is not known, or goodput without an SLO."""


def get(name: str | None) -> Objective:
    """The objective of that name (None or empty: the default); ObjectiveError naming the choices."""
    if not name:
        return DEFAULT
    try:
        return OBJECTIVES[name]
    except KeyError:
        raise ObjectiveError(f"objective: {name!r} is not one of {', '.join(NAMES)}") from None


def sla_problem(objective: Objective, sla_given: bool) -> str | None:
    """Why this objective cannot rank with these SLOs (goodput with none), or None."""
    if objective.needs_sla and not sla_given:
        return (
            f"objective: {objective.name} counts requests within the SLOs; set sla_ttft_p99_ms or "
            "sla_itl_p99_ms (--sla-ttft-p99-ms / --sla-itl-p99-ms)"
        )
    return None


def add_option(parser: argparse.ArgumentParser) -> None:
    """--objective NAME (report, recommend, ingest, regress)."""
    parser.add_argument(
        "--objective", choices=NAMES, default=DEFAULT.name,
        help=f"what ranks configs: throughput (total tok/s), per_user (a request's tokens / its e2e "
        f"latency) or goodput (requests/s within the SLA; needs --sla-*); default {DEFAULT.name}",
    )  # fmt: skip


def from_args(args: argparse.Namespace) -> Objective:
    """The objective the --objective option gave."""
    return get(args.objective)
