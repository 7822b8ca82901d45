"""The gate a freshly deployed server must pass before the rollout goes on: the short benchmark run
after its restart against what the sweep measured for the same config on the same host.

In order: no request errors; the sweep's objective (throughput or per_user in tok/s, goodput in
req/s: the requests within the sweep's SLOs over the run's duration; per run as the report's, their
median; for a mix, each workload's median weighed as the sweep's mix row weighs them) not below the
sweep's 95% lower bound for that config, or, with a tolerance, not below the sweep's median less
that many %; the accept length (speculative configs) within the sweep's 95% interval widened by ACCEPT_SLACK
each side. Where the sweep has no interval (one good repeat) DEFAULT_TOLERANCE_PCT stands in.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from analysis import objectives
from analysis.facts.rows import run_numbers
from analysis.facts.schema import Run, SchemaError, from_dict
from analysis.report import mix
from analysis.report.sla import Sla, run_values

# A short run's acceptance wanders a little from the sweep's over the same prompts (batching, the
# n-gram table's warm-up): a relative margin around the interval, so that only a real change fails.
ACCEPT_SLACK = 0.1
# % below the sweep's median allowed where the sweep has no interval to take the bound from.
DEFAULT_TOLERANCE_PCT = 10.0


@dataclass(frozen=True)
class Verdict:
    """Whether the gate passed, which part failed (None: none), why, and the figures compared.

    tok_s and tok_s_floor hold the objective's figure whatever its unit (`unit`: req/s for goodput),
    under the names the deployments history has stored since before there were objectives.
    """

    passed: bool
    gate: str | None
    detail: str
    tok_s: float | None
    tok_s_floor: float | None
    accept_length: float | None
    errors: int
    requests: int
    unit: str = "tok/s"

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON types, for the action plugin's result and the history."""
        return asdict(self)


def rate(
    runs: Sequence[Run], tps: Sequence[float | None], shares: Mapping[str, float] | None
) -> float | None:
    """The runs' rate (`tps`, one per run): their median; with a mix, the mix's rate over each
    workload's median (analysis.report.mix.rates, as the sweep's mix row), None missing one."""
    measured = [(r.workload, t) for r, t in zip(runs, tps, strict=True) if t is not None]
    if not shares:
        return statistics.median(t for _, t in measured) if measured else None
    frame = pd.DataFrame(measured, columns=["workload", "rate"]).groupby("workload", as_index=False).median()
    blended = mix.rates(frame.assign(all=0), shares, ["all"])
    return None if blended.empty or pd.isna(blended.iloc[0]) else float(blended.iloc[0])


def measured(
    bench: dict[str, Any],
    shares: Mapping[str, float] | None = None,
    objective: str | None = None,
    sla: Sla | None = None,
) -> tuple[float | None, float | None, int, int, str | None]:
    """(the objective's rate, accept length, errors, requests, first error) of a benchmark client
    document; goodput counts the requests within `sla`."""
    try:
        runs = from_dict(list[Run], bench.get("runs") or [])
    except SchemaError as exc:
        return None, None, 1, 0, f"unreadable benchmark output: {exc}"
    numbers = [run_numbers(r) for r in runs]
    tps = rate(runs, run_values(runs, objectives.get(objective), sla), shares)
    accepts = [r.spec.accept_length for r in runs if r.spec.accept_length is not None]
    errors = sum(n["n_errors"] for n in numbers) + (1 if bench.get("error") else 0)
    first = bench.get("error") or next((n["message"] for n in numbers if n["message"]), None)
    requests = sum(n["n_requests"] for n in numbers)
    return (
        tps,
        statistics.fmean(accepts) if accepts else None,
        errors,
        requests,
        first,
    )


def floor(sweep: dict[str, Any], tolerance_pct: float | None) -> float:
    """The lowest rate of the objective the gate accepts (see the module doc)."""
    if tolerance_pct is None and sweep.get("tok_s_ci_lo") is not None:
        return float(sweep["tok_s_ci_lo"])
    pct = DEFAULT_TOLERANCE_PCT if tolerance_pct is None else tolerance_pct
    return float(sweep["tok_s"]) * (1.0 - pct / 100.0)


def judge(
    sweep: dict[str, Any],
    bench: dict[str, Any],
    tolerance_pct: float | None = None,
    shares: Mapping[str, float] | None = None,
) -> Verdict:
    """The gate's verdict on one host's short benchmark against the sweep's figures for its config
    (for the mix `shares` where the deploy named one: the sweep's figures are then the mix's)."""
    objective = objectives.get(sweep.get("objective"))
    sla = Sla(sweep.get("sla_ttft_p99_ms"), sweep.get("sla_itl_p99_ms"))
    tps, accept, errors, requests, first = measured(bench, shares, objective.name, sla)
    low = floor(sweep, tolerance_pct)
    unit = objective.unit
    # A token rate's gate keeps its old name; goodput's is named so (its figure is no tok/s).
    name = "tok/s" if unit == "tok/s" else objective.name
    figures = {
        "tok_s": tps,
        "tok_s_floor": low,
        "accept_length": accept,
        "errors": errors,
        "requests": requests,
        "unit": unit,
    }
    if errors or not requests:
        detail = f"{errors} of {requests} request(s) failed" + (f" ({first})" if first else "")
        return Verdict(False, "errors", detail, **figures)
    if tps is None or tps < low:
        bound = "95% CI low" if tolerance_pct is None and sweep.get("tok_s_ci_lo") is not None else "floor"
        got = f"no {name}" if tps is None else _said(tps, name, unit)
        median = float(sweep["tok_s"])
        detail = f"{got}, below the sweep's {bound} {_num(low, unit)} (median {_num(median, unit)})"
        return Verdict(False, name, detail, **figures)
    lo, hi = sweep.get("accept_ci_lo"), sweep.get("accept_ci_hi")
    if sweep.get("accept_length") is not None and lo is not None and hi is not None:
        low_a, high_a = lo * (1.0 - ACCEPT_SLACK), hi * (1.0 + ACCEPT_SLACK)
        if accept is None or not low_a <= accept <= high_a:
            got = "no accept length" if accept is None else f"accept length {accept:.2f}"
            detail = f"{got}, outside the sweep's {low_a:.2f}..{high_a:.2f} (95% CI {lo:.2f}..{hi:.2f} +-10%)"
            return Verdict(False, "accept length", detail, **figures)
    said = f"{_said(tps, name, unit)} (floor {_num(low, unit)})" + (
        f", accept length {accept:.2f}" if accept else ""
    )
    return Verdict(True, None, f"{said}, {requests} request(s), no errors", **figures)


def _said(value: float, name: str, unit: str) -> str:
    """`98.0 tok/s`, or `goodput 3.2 req/s`: the figure with its unit, and its objective where the
    unit alone does not say it."""
    return f"{_num(value, unit)} {unit}" if name == unit else f"{name} {_num(value, unit)} {unit}"


def _num(value: float, unit: str) -> str:
    """A figure as printed: tok/s to 0.1, requests/s (a few a second) to 0.01."""
    return f"{value:.1f}" if unit == "tok/s" else f"{value:.2f}"
