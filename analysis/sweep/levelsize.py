"""How long each level measures on a host: until its interval is tight, or for what a launch is worth.

A config's verdict carries two errors: its launch's (a fresh server, another moment: the host's
launch-to-launch spread) and its level's requests' (the request-to-request spread over the
requests sent). Requests are cheap and launches dear on a GPU host (12.5 min to load the seed
case's model), the other way round on a CPU host that loads in seconds. Kalibera and Jones
("Rigorous benchmarking in reasonable time", 2013) allocate repetitions between such levels by cost
and variance: a launch is best measured with sqrt(launch cost / request cost) x request CV / launch CV
requests (analysis.sweep.estimate.worth_sending); fewer leave the launch's cost half-used, more
narrow the interval less per second than another launch would.

Where the host's history knows its launch spread and load time and the operator set no interval
(bench_ci_pct), each level sends that many (the client's rule, specsweep_bench.py worth_sending,
measured as it goes), within a budget of at least one launch's cost. Elsewhere the interval rule:
3% within 60 s a level.
"""

from __future__ import annotations

from typing import Any

import msgspec

from analysis.sweep.launchprior import LaunchPrior

DEFAULT_CI_PCT = 3.0  # bench_ci_pct where the launch rule does not apply
DEFAULT_BUDGET_S = 60.0  # bench_level_budget_s, and the least a level's budget is under the launch rule


class LevelSizing(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """How a host's levels stop, as its client is told: the interval rule (ci_pct) or the launch rule
    (launch_cost_s and launch_cv_pct), within budget_s a level."""

    ci_pct: float | None
    budget_s: float
    launch_cost_s: float | None = None
    launch_cv_pct: float | None = None

    def settings(self) -> dict[str, Any]:
        """The sweep settings the client's argv is built from (analysis.sweep.client)."""
        return {
            "bench_ci_pct": self.ci_pct,
            "bench_level_budget_s": self.budget_s,
            "bench_launch_cost_s": self.launch_cost_s,
            "bench_launch_cv_pct": self.launch_cv_pct,
        }


def sizing(
    ci_pct: float | None, budget_s: float | None, prior: LaunchPrior | None, launch_cost_s: float | None
) -> LevelSizing:
    """A host's rule: the operator's interval (`ci_pct`) where given; else the launch rule where the
    host's history knows its launch spread (`prior`) and what a launch costs (`launch_cost_s`: load
    and the suite's work around it); else the default interval. The budget: the operator's, else the
    default, raised under the launch rule to one launch's cost (a level is never cut short of what a
    relaunch would cost anyway)."""
    unknown = prior is None or not prior.from_history or prior.cv_pct <= 0 or not launch_cost_s
    if ci_pct is not None or unknown:
        return LevelSizing(
            ci_pct=DEFAULT_CI_PCT if ci_pct is None else ci_pct,
            budget_s=DEFAULT_BUDGET_S if budget_s is None else budget_s,
        )
    cost = round(launch_cost_s, 1)
    return LevelSizing(
        ci_pct=None,
        budget_s=max(DEFAULT_BUDGET_S, cost) if budget_s is None else budget_s,
        launch_cost_s=cost,
        launch_cv_pct=round(prior.cv_pct, 3),
    )


def describe(s: LevelSizing) -> str:
    """The plan's words for a host's launch rule."""
    return (
        f"each level measures what a launch is worth (load and suite {s.launch_cost_s:g} s, launch spread "
        f"{s.launch_cv_pct:.1f}%: Kalibera and Jones) within {s.budget_s:g} s "
        "(-e bench_ci_pct=3: the interval rule)"
    )
