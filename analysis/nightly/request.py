"""The nightly's own settings: its grid (a sweep request) and its regression rule, with defaults.

group_vars may override any of them under `specsweep_nightly` (the example in group_vars/all.yml
shows these defaults); `-e steps=...` and the like still win for one night.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Mapping
from typing import Any

from analysis.nightly.settings import Settings
from analysis.sweep.request import BY_NAME, ranking_options

DEFAULTS: dict[str, Any] = {
    # The grid: the sweep's settings of the same names (analysis.sweep.request).
    "steps": [1, 2, 4],
    "topk": [],
    "draft_tokens": [],
    "algorithm": "",
    "baseline": True,
    # Repeats per config: the regression check compares their median.
    "repeats": 3,
    "warmup": 1,
    "max_tokens": 96,
    "concurrency": [1],
    "env_profiles": [],
    # The service's SLOs (ms; None: none): the report and each night's stored recommendation use them.
    "sla_ttft_p99_ms": None,
    "sla_itl_p99_ms": None,
    # The regression check (`python -m analysis regress`): its rules' settings, each the option of
    # the same name (analysis.nightly.settings says what they mean); `objective` is the sweep's too,
    # so the night's report, stored recommendation and regressions rank on the same figure.
    **Settings().as_dict(),
}
REGRESS = tuple(field.name for field in dataclasses.fields(Settings))


def settings(overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """The nightly's settings: DEFAULTS with `specsweep_nightly` over them; unknown keys and
    regression settings no rule can use refused (the grid's values are the sweep's to check)."""
    unknown = sorted(set(overrides or {}) - set(DEFAULTS))
    if unknown:
        known = ", ".join(DEFAULTS)
        raise ValueError(f"specsweep_nightly: unknown key(s) {', '.join(unknown)}; known: {known}")
    merged = {**DEFAULTS, **(overrides or {})}
    try:
        Settings(**{name: merged[name] for name in REGRESS})
    except ValueError as exc:
        raise ValueError(f"specsweep_nightly: {exc}") from None
    return merged


def regress_options(settings: Mapping[str, Any]) -> list[str]:
    """The regression settings of `settings` (as `settings()` returns them) as `regress` options."""
    return [arg for name in REGRESS for arg in (Settings.option(name), str(settings[name]))]


def sweep_request(
    overrides: Mapping[str, Any] | None,
    mode: Any = None,
    plan_only: Any = None,
    deployed: Mapping[str, str] | None = None,
) -> dict:
    """The night's sweep request: its grid, every host measuring every config and the one deployed
    there (`deployed`, host -> config id: analysis.deploy.deployed.deployed_configs), named nightly-<UTC>.

    `mode` / `plan_only` are what -e says: a night that would not measure the whole grid on every
    host is refused.
    """
    if mode not in (None, "", "replicate") or str(plan_only).lower() in ("true", "yes", "1"):
        raise ValueError(
            "The nightly measures the whole grid on every host, so it runs in replicate mode and never "
            f"plan-only (got mode={mode}, plan_only={plan_only})"
        )
    grid = {k: v for k, v in settings(overrides).items() if k in BY_NAME}
    now = datetime.datetime.now(datetime.UTC)
    # One launch per config a night: the history holds one fact per (host, config) and night, and its
    # night-to-night noise already is the launch-to-launch layer (docs/trust.md); -e still wins.
    once = {"baseline_every": 0, "finalists": False}
    # The deployed config is measured each night too, so that the report can say how far the
    # night's recommendation has moved from what production runs, on that night's numbers.
    own = {"host_configs": {host: [config] for host, config in (deployed or {}).items()}}
    return {**once, **grid, **own, "mode": "replicate", "sweep_id": now.strftime("nightly-%Y%m%dT%H%M%SZ")}


def history_path(history: str | None, results_dir: str | None, repo: str) -> str:
    """The history store a night is added to: -e nightly_history, else history.sqlite in the
    results folder (-e results_dir, else the repo's results/)."""
    return history or f"{results_dir or os.path.join(repo, 'results')}/history.sqlite"


def commands(night: Mapping[str, Any]) -> dict[str, Any]:
    """The night's analysis commands (`report`, `ingest`, `regress` argv) and where they write
    (`history`, `out`), for playbooks/nightly.yml.

    night: `python` (the controller's), `sweep` (the plan's: dir, id, settings), `overrides`
    (specsweep_nightly), and -e's `history`, `reports_dir` and `prometheus` (None or empty: the
    history and reports next to the results folder, no textfile).
    """
    sweep = night["sweep"]
    results = os.path.dirname(sweep["dir"])
    history = history_path(night.get("history"), results, "")
    out = f"{night.get('reports_dir') or f'{results}/nightly/reports'}/{sweep['id']}"
    analysis = [night["python"], "-m", "analysis"]
    # The sweep's SLOs and objective reach the report, the stored recommendation and the regression
    # check (none when unset), so that every night ranks and judges on what the operator chose.
    sla = ranking_options(sweep["settings"])
    prometheus = ["--prometheus", night["prometheus"]] if night.get("prometheus") else []
    files = [
        "--markdown",
        f"{out}/regress.md",
        "--junit",
        f"{out}/regress.xml",
        "--json",
        f"{out}/regress.json",
    ]
    rules = regress_options(settings(night.get("overrides")))
    return {
        "history": history,
        "out": out,
        "report": [*analysis, "report", sweep["dir"], "--out", out, *sla],
        "ingest": [*analysis, "ingest", sweep["dir"], "--history", history, *sla],
        "regress": [
            *analysis,
            "regress",
            "--history",
            history,
            "--latest",
            sweep["id"],
            *rules,
            *files,
            *prometheus,
        ],
    }
