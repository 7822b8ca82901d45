"""The gate a freshly deployed server must pass before the rollout goes on: the short benchmark run
after its restart against what the sweep measured for the same config on the same host.

In order: no request errors; tok/s (the median over requests of decode tok/s, as the report's) not
below the sweep's 95% lower bound for that config, or, with a tolerance, not below the sweep's median
less that many %; the accept length (speculative configs) within the sweep's 95% interval widened by
ACCEPT_SLACK each side. Where the sweep has no interval (one good repeat) DEFAULT_TOLERANCE_PCT stands in.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from analysis.facts.rows import run_numbers
from analysis.facts.schema import Run, SchemaError, from_dict

# A short run's acceptance wanders a little from the sweep's over the same prompts (batching, the
# n-gram table's warm-up): a relative margin around the interval, so that only a real change fails.
ACCEPT_SLACK = 0.1
# % below the sweep's median tok/s allowed where the sweep has no interval to take the bound from.
DEFAULT_TOLERANCE_PCT = 10.0


@dataclass(frozen=True)
class Verdict:
    """Whether the gate passed, which part failed (None: none), why, and the figures compared."""

    passed: bool
    gate: str | None
    detail: str
    tok_s: float | None
    tok_s_floor: float | None
    accept_length: float | None
    errors: int
    requests: int

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON types, for the action plugin's result and the history."""
        return asdict(self)


def measured(bench: dict[str, Any]) -> tuple[float | None, float | None, int, int, str | None]:
    """(tok/s, accept length, errors, requests, first error) of a benchmark client document."""
    try:
        runs = from_dict(list[Run], bench.get("runs") or [])
    except SchemaError as exc:
        return None, None, 1, 0, f"unreadable benchmark output: {exc}"
    numbers = [run_numbers(r) for r in runs]
    tps = [n["decode_tps"] for n in numbers if n["decode_tps"] is not None]
    accepts = [r.spec.accept_length for r in runs if r.spec.accept_length is not None]
    errors = sum(n["n_errors"] for n in numbers) + (1 if bench.get("error") else 0)
    first = bench.get("error") or next((n["message"] for n in numbers if n["message"]), None)
    requests = sum(n["n_requests"] for n in numbers)
    return (
        statistics.median(tps) if tps else None,
        statistics.fmean(accepts) if accepts else None,
        errors,
        requests,
        first,
    )


def floor(sweep: dict[str, Any], tolerance_pct: float | None) -> float:
    """The lowest tok/s the gate accepts (see the module doc)."""
    if tolerance_pct is None and sweep.get("tok_s_ci_lo") is not None:
        return float(sweep["tok_s_ci_lo"])
    pct = DEFAULT_TOLERANCE_PCT if tolerance_pct is None else tolerance_pct
    return float(sweep["tok_s"]) * (1.0 - pct / 100.0)


def judge(sweep: dict[str, Any], bench: dict[str, Any], tolerance_pct: float | None = None) -> Verdict:
    """The gate's verdict on one host's short benchmark against the sweep's figures for its config."""
    tps, accept, errors, requests, first = measured(bench)
    low = floor(sweep, tolerance_pct)
    figures = {
        "tok_s": tps,
        "tok_s_floor": low,
        "accept_length": accept,
        "errors": errors,
        "requests": requests,
    }
    if errors or not requests:
        detail = f"{errors} of {requests} request(s) failed" + (f" ({first})" if first else "")
        return Verdict(False, "errors", detail, **figures)
    if tps is None or tps < low:
        bound = "95% CI low" if tolerance_pct is None and sweep.get("tok_s_ci_lo") is not None else "floor"
        got = "no tok/s" if tps is None else f"{tps:.1f} tok/s"
        detail = f"{got}, below the sweep's {bound} {low:.1f} (median {float(sweep['tok_s']):.1f})"
        return Verdict(False, "tok/s", detail, **figures)
    lo, hi = sweep.get("accept_ci_lo"), sweep.get("accept_ci_hi")
    if sweep.get("accept_length") is not None and lo is not None and hi is not None:
        low_a, high_a = lo * (1.0 - ACCEPT_SLACK), hi * (1.0 + ACCEPT_SLACK)
        if accept is None or not low_a <= accept <= high_a:
            got = "no accept length" if accept is None else f"accept length {accept:.2f}"
            detail = f"{got}, outside the sweep's {low_a:.2f}..{high_a:.2f} (95% CI {lo:.2f}..{hi:.2f} +-10%)"
            return Verdict(False, "accept length", detail, **figures)
    said = f"{tps:.1f} tok/s (floor {low:.1f})" + (f", accept length {accept:.2f}" if accept else "")
    return Verdict(True, None, f"{said}, {requests} request(s), no errors", **figures)
