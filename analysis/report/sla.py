"""Latency SLAs, goodput and throughput per (config, concurrency): what a deployment is judged by.

Goodput follows DistServe and SGLang 0.5.23's `sglang.benchmark.goodput.calculate_goodput`: a
request is good when it succeeded and each per-request latency given an SLO is at most it; the
latencies compared are the request's TTFT and its TPOT, (e2e latency - TTFT) / (output tokens - 1),
0 for a single-token answer (goodput.py lines 32-35); goodput is good requests / the run's
duration. A steady-load run (docs/load.md) counts the good share of the requests wholly inside its
window times the requests served inside it, those straddling its edges by their share of time.
Our `--sla-itl-p99-ms` is that TPOT SLO per request (SGLang's `--goodput tpot:N`), and
the config-level "meets SLA" asks the same number of the p99 TPOT the step table shows.

Throughput for the Pareto front: total tok/s = every request's output tokens / the run's duration;
per-user tok/s = a request's output tokens / its e2e latency, the median request (the per_user
objective, analysis.objectives; in a closed loop that holds its level it is vLLM's
`bench sweep plot_pareto` tokens_per_user, total / concurrency, by Little's law, and unlike that it
still means one user's speed in an open loop). Cell values are medians over a config's measured
repeats.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.facts.rows import run_numbers
from analysis.facts.schema import Run
from analysis.objectives import Objective
from analysis.report.compare import GROUP, run_score, total_tps

CELL = [*GROUP, "config"]  # one step-table row
SLA_COLUMNS = ["total_tps", "user_tps", "goodput_rps", "slo_attainment", "meets_sla"]


@dataclass(frozen=True)
class Sla:
    """Latency targets in milliseconds; None where not given."""

    ttft_p99_ms: float | None = None
    itl_p99_ms: float | None = None

    @property
    def given(self) -> bool:
        """Whether any target was set (without one there is no goodput, as in SGLang)."""
        return self.ttft_p99_ms is not None or self.itl_p99_ms is not None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Sla:
        """The SLA that add_sla_options' options give."""
        return cls(args.sla_ttft_p99_ms, args.sla_itl_p99_ms)

    def describe(self) -> str:
        """The targets as one phrase: TTFT p99 <= 500 ms, TPOT p99 <= 50 ms."""
        parts = [
            f"{name} p99 <= {value:g} ms"
            for name, value in (("TTFT", self.ttft_p99_ms), ("TPOT", self.itl_p99_ms))
            if value is not None
        ]
        return ", ".join(parts) or "no SLA"


def _ms(text: str) -> float:
    """A latency target in milliseconds, > 0."""
    value = float(text)
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of milliseconds")
    return value


def add_sla_options(parser: argparse.ArgumentParser) -> None:
    """--sla-ttft-p99-ms and --sla-itl-p99-ms (report and recommend)."""
    parser.add_argument(
        "--sla-ttft-p99-ms", type=_ms, metavar="N",
        help="SLA on time to first token: a config meets it with p99 TTFT <= N ms; a request counts "
        "toward goodput with TTFT <= N",
    )  # fmt: skip
    parser.add_argument(
        "--sla-itl-p99-ms", type=_ms, metavar="N",
        help="SLA on per-token latency (TPOT): a config meets it with p99 TPOT <= N ms; a request counts "
        "toward goodput with TPOT <= N (SGLang's goodput)",
    )  # fmt: skip


def good_requests(requests: pd.DataFrame, sla: Sla) -> pd.Series:
    """Per request: succeeded and within every SLO given (SGLang's calculate_goodput)."""
    ok = requests["error"].isna()
    tokens = requests["output_tokens"].astype("float64")
    ttft = requests["ttft_s"].astype("float64")
    # A single-token response has no inter-token interval: its TPOT counts as 0.
    tpot = ((requests["e2e_s"] - ttft) / (tokens - 1.0)).where(tokens > 1, 0.0)
    good = ok.copy()
    if sla.ttft_p99_ms is not None:
        good &= ttft * 1000.0 <= sla.ttft_p99_ms
    if sla.itl_p99_ms is not None:
        good &= tpot * 1000.0 <= sla.itl_p99_ms
    return good.fillna(False).astype(bool)


def run_table(runs: pd.DataFrame, requests: pd.DataFrame | None, sla: Sla) -> pd.DataFrame:
    """One row per measured run: total tok/s, goodput (req/s) and SLO attainment.

    Every measured run, a repeat with a failed request included: goodput counts a failed request
    as not good (as SGLang does), and output tokens are those of the requests that completed.
    """
    measured = runs[runs["run_index"].notna()]
    keys = ["fact_id", "run_index"]
    window = ["window_output_tokens", "window_requests"]
    out = measured[[*CELL[:-1], "config_id", *keys, "duration_s", "output_tokens", *window]].astype(
        {"config_id": "object"}
    )
    out = out.assign(total_tps=total_tps(out))
    if requests is None or requests.empty or not sla.given:
        return out.assign(goodput_rps=np.nan, slo_attainment=np.nan)
    duration = out["duration_s"].where(out["duration_s"] > 0)
    counted = (
        requests.assign(good=good_requests(requests, sla))
        .groupby(keys, observed=True)["good"]
        .agg(n_good="sum", n_sent="count")
        .reset_index()
        .astype({"run_index": "Int64"})
    )
    out = out.merge(counted, on=keys, how="left")
    attainment = out["n_good"].astype("float64") / out["n_sent"].astype("float64")
    # The requests wholly inside a steady-load window leave out the c - 1 straddling each edge: the
    # window's served requests (the client's, Little's law) times the good share is the good rate.
    good = (attainment * out["window_requests"].astype("float64")).fillna(out["n_good"].astype("float64"))
    return out.assign(goodput_rps=good / duration.to_numpy(), slo_attainment=attainment)


def with_run_goodput(runs: pd.DataFrame, requests: pd.DataFrame | None, sla: Sla) -> pd.DataFrame:
    """The run rows with goodput_rps per measured run (run_table's; NaN for the others and without
    an SLA): what the goodput objective ranks on (analysis.report.compare.run_score)."""
    keys = ["fact_id", "run_index"]
    # A folder named twice loads its runs twice: one goodput per run, whichever row it came from.
    per_run = run_table(runs, requests, sla)[[*keys, "goodput_rps"]].drop_duplicates(keys)
    found = runs[keys].merge(per_run, on=keys, how="left")
    return runs.assign(goodput_rps=found["goodput_rps"].to_numpy())


def run_values(runs: Sequence[Run], objective: Objective, sla: Sla | None = None) -> list[float | None]:
    """Each run's value of the objective by run_score's rule, read from a fact's or a benchmark's
    runs rather than the report's rows (the step search, the deploy gate); None for a run that did
    not complete. Goodput counts each run's requests within `sla` as the report does
    (with_run_goodput); without an SLO it has no value."""
    numbers = [run_numbers(r) for r in runs]
    frame = pd.DataFrame(
        {
            "run_index": range(len(runs)),
            "user_tps": [n["user_tps"] for n in numbers],
            "output_tokens": [n["output_tokens"] for n in numbers],
            "duration_s": [r.duration_s for r in runs],
            "window_output_tokens": [r.window_output_tokens for r in runs],
            "window_requests": [r.window_requests for r in runs],
        },
        dtype="float64",
    ).assign(run_ok=[n["run_ok"] for n in numbers], fact_id=0)
    if objective.needs_sla:
        requests = pd.DataFrame(
            [
                (0, i, q.error, q.output_tokens, q.ttft_s, q.e2e_s)
                for i, r in enumerate(runs)
                for q in r.requests
            ],
            columns=["fact_id", "run_index", "error", "output_tokens", "ttft_s", "e2e_s"],
        )
        # The run rows' table keys: one benchmark, so none tells its runs apart (run_index does).
        keys = dict.fromkeys([*GROUP, "config_id"])
        frame = with_run_goodput(frame.astype({"run_index": "Int64"}).assign(**keys), requests, sla or Sla())
    return [None if pd.isna(v) else float(v) for v in run_score(frame, objective)]


def meets(step: pd.DataFrame, sla: Sla) -> pd.Series:
    """Per step-table row: p99 TTFT and p99 TPOT within the targets; <NA> without an SLA.

    A missing p99 (a config that failed, or a JSONL without it) does not meet a target.
    """
    if not sla.given:
        return pd.Series(pd.NA, index=step.index, dtype="boolean")
    ok = pd.Series(True, index=step.index)
    if sla.ttft_p99_ms is not None:
        ok &= step["ttft_p99_ms"].le(sla.ttft_p99_ms).fillna(False).astype(bool)
    if sla.itl_p99_ms is not None:
        ok &= step["tpot_p99_ms"].le(sla.itl_p99_ms).fillna(False).astype(bool)
    return ok.astype("boolean")


def with_sla(step: pd.DataFrame, runs: pd.DataFrame, requests: pd.DataFrame | None, sla: Sla) -> pd.DataFrame:
    """The step table with SLA_COLUMNS: medians over each cell's measured repeats, and the verdict.

    Total and per-user tok/s come with the step table (one groupby for all); goodput, only with an SLA.
    """
    derived = [c for c in SLA_COLUMNS if c not in ("total_tps", "user_tps") and c in step.columns]
    out = step.drop(columns=derived).reset_index(drop=True)
    out["total_tps"] = out.pop("total_tps")  # moved to the end, first of SLA_COLUMNS
    out["user_tps"] = out.pop("user_tps")
    out["goodput_rps"] = out["slo_attainment"] = np.nan
    if sla.given and requests is not None and not requests.empty:
        per_run = run_table(runs, requests, sla).rename(columns={"config_id": "config"})
        cells = (
            per_run.groupby(CELL, dropna=False, observed=True)
            .agg(goodput_rps=("goodput_rps", "median"), slo_attainment=("slo_attainment", "median"))
            .reset_index()
        )
        text = {c: "object" for c in ("sweep_id", "host", "engine", "model", "config")}
        found = (
            step[CELL].astype(text).merge(cells.astype({**text, "concurrency": "Int64"}), on=CELL, how="left")
        )
        out["goodput_rps"] = found["goodput_rps"].to_numpy()
        out["slo_attainment"] = found["slo_attainment"].to_numpy()
    out["meets_sla"] = meets(out, sla)
    return out
