"""What `regress` hands to people and CI: a Markdown summary, a JUnit XML file and a JSON file.

The verdicts decide the exit status and the JUnit failures; the recommendation changes
(analysis.nightly.recommendations) and the deployed configs against the night's recommendation
(analysis.deployments) are information, in the summary and the JSON only.
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis import deployments, objectives
from analysis.nightly import recommendations
from analysis.nightly.judge import FAILING, HARMFUL, VERDICTS, YOUNG_NIGHTS, Priors
from analysis.nightly.noise import MIN_CELLS, NO_PRIOR
from analysis.nightly.settings import MIN_NIGHTS, RECENT_TEXT, Settings
from analysis.nightly.verdicts import COLUMNS

MISSING = "–"


@dataclass(frozen=True)
class Night:
    """What the summary and the JSON tell: the judged sweep, its verdicts, the settings and the shared
    noise they were judged with, and its recommendation changes (recommendations.CHANGES rows)."""

    table: pd.DataFrame
    latest: str
    settings: Settings
    recommendations: pd.DataFrame
    # The night-to-night noise the cells share, per series (recent_drop's; judge.fleet_noise).
    noise: Priors = field(default_factory=dict)
    # Each host's latest deployment against the night's recommendation (analysis.deployments.moved).
    deployed: pd.DataFrame = field(default_factory=pd.DataFrame)


SECTIONS = [
    ("regressed", "Regressions"),
    ("failed", "Failed in the latest sweep (measured before)"),
    ("improved", "Improvements"),
    ("version_changed", f"Engine version changed (fewer than {MIN_NIGHTS} nights to compare across it)"),
    ("new", "New configs"),
    ("missing", "Missing from the latest sweep"),
]
SKIPPED = ("missing", "version_changed")
MOVED = ("regressed", "improved")  # verdicts with a component
HEADER = ["host", "engine", "version", "model", "config", "conc", "latest tok/s", "baseline tok/s",
          "change [95% CI]", "since", "component", "rule", "cause"]  # fmt: skip
RIGHT = {"conc", "latest tok/s", "baseline tok/s", "change [95% CI]"}


def _f(value: object, fmt: str) -> str:
    """A number for display, a dash when missing."""
    return MISSING if value is None or pd.isna(value) else format(value, fmt)


def _model(value: object) -> str:
    """A model path shortened to its last component."""
    return str(value).rstrip("/").rsplit("/", 1)[-1]


def _cell_config(r: pd.Series) -> str:
    """A cell's config, with its workload where the sweep named one: `s2 (chat)`."""
    workload = r.get("workload")
    return f"{r['config_id']} ({workload})" if isinstance(workload, str) and workload else str(r["config_id"])


def _text(value: object) -> str:
    """A string cell, empty when missing."""
    return value if isinstance(value, str) else ""


def _change(r: pd.Series) -> str:
    """The tok/s change with its interval where there is one: -10.1% [-11.0, -9.2]."""
    if pd.isna(r["change_pct"]):
        return MISSING
    ci = "" if pd.isna(r["change_lo_pct"]) else f" [{r['change_lo_pct']:+.1f}, {r['change_hi_pct']:+.1f}]"
    return f"{r['change_pct']:+.1f}%{ci}"


def _row(r: pd.Series) -> list[str]:
    """One verdict as Markdown table cells."""
    version = str(r["engine_version"])
    if isinstance(r["previous_version"], str):
        version = f"{r['previous_version']} → {version}"
    n = "" if pd.isna(r["baseline_nights"]) else f" (n={int(r['baseline_nights'])})"
    return [
        str(r["host"]), str(r["engine"]), version, _model(r["model"]), _cell_config(r),
        _f(r["concurrency"], ".0f"), _f(r["latest_tps"], ".1f"), _f(r["baseline_tps"], ".1f") + n,
        _change(r), _text(r["changed_at"]), r["component"] if r["verdict"] in MOVED else "",
        _text(r["rule"]), _text(r["cause"]),
    ]  # fmt: skip


def _rules(s: Settings) -> str:
    """What the verdicts mean under these settings, in one paragraph."""
    change_point = (
        f"a change point in the cell's nightly median {objectives.get(s.objective).label()} (objective"
        f" {s.objective}; E-divisive means over its last {s.nights} nights, across engine versions;"
        f" Student's t p ≤ {s.alpha:g}, a change of at least"
        f" {s.min_change * 100:g}%) that starts a segment within the last {s.window} night(s), or a drop"
        f" of at least {s.min_change * 100:g}% over the last {RECENT_TEXT} nights against the nights before"
        f" them, in tok/s or in the accept length or step time that carries half of it (one-sided t p ≤"
        f" {s.recent_alpha:g} shared among the series tested; rule recent_drop)"
    )
    window = (
        f"the latest night against the median of the previous {s.window} night(s) of the same engine"
        f" version, beyond {s.threshold * 100:g}% and {s.mad_k:g} x MAD"
    )
    rule = {
        "change_point": f"{change_point} (rule change_point); while a cell has fewer than {YOUNG_NIGHTS}"
        f" nights, also {window} (rule window)",
        "window": f"{window} (rule window)",
        "either": f"{change_point} (rule change_point), or {window} (rule window)",
    }[s.rule]
    return (
        f"A cell regressed or improved on {rule}. A speculative cell whose accept length falls below"
        f" {s.min_accept_length:g}, or {s.accept_drop * 100:g}% below the median of its previous nights,"
        " regressed whatever tok/s did (rule accept_gate). `since`: the first night of the new segment;"
        " component: what moved tok/s (acceptance: accept length; step_time: time per verify step)."
    )


SERIES = {"tps": "tok/s", "accept": "accept length", "step": "step time"}  # HARMFUL's, in words


def _noise(priors: Priors, s: Settings) -> str:
    """What the recent-drop test took from the other cells, in one sentence."""
    given = {name: prior for name, prior in priors.items() if prior.given}
    if not given:
        why = (
            "noise: own"
            if s.noise == "own"
            else f"fewer than {MIN_CELLS} cells with {MIN_NIGHTS} nights or more"
        )
        return f"The recent-drop test used each cell's own noise ({why})."
    shared = ", ".join(
        f"{SERIES[name]} CV {prior.cv_pct:.1f}% ({prior.cells} cells, worth {prior.df:.0f} nights)"
        for name, prior in given.items()
    )
    return f"The recent-drop test shared the night-to-night noise of the cells judged with it: {shared}."


def _summary(night: Night) -> list[str]:
    """Heading, the rules, and the counts."""
    table, latest, s = night.table, night.latest, night.settings
    counts = table["verdict"].value_counts()
    return [
        f"## specsweep regress: sweep {latest}",
        "",
        _rules(s),
        "",
        _noise(night.noise, s),
        "",
        f"**{counts.get('regressed', 0)} regression(s)**, {counts.get('failed', 0)} failed,"
        f" {counts.get('improved', 0)} improvement(s), {counts.get('unchanged', 0)} unchanged,"
        f" {counts.get('new', 0)} new, {counts.get('missing', 0)} missing,"
        f" {int(table['previous_version'].notna().sum())} engine-version change(s).",
    ]


def _tables(night: Night) -> list[str]:
    """One table per kind of verdict that occurred (unchanged cells are only counted)."""
    table = night.table
    lines: list[str] = []
    align = "|" + "|".join("---:" if h in RIGHT else "---" for h in HEADER) + "|"
    for verdict, heading in SECTIONS:
        part = table[table["verdict"] == verdict]
        if part.empty:
            continue
        lines += ["", f"### {heading} ({len(part)})", "", "| " + " | ".join(HEADER) + " |", align]
        lines += [
            "| " + " | ".join(c.replace("|", "\\|") for c in _row(r)) + " |" for _, r in part.iterrows()
        ]
    return lines


def changes_text(changes: list[dict[str, Any]] | None) -> str:
    """A provenance diff in one line."""
    if changes is None:
        return "provenance not recorded for one of the two nights"
    if not changes:
        return "nothing recorded changed (engine, model, driver/CUDA, env, argv, suite)"
    return "; ".join(f"{c['field']}: {c['before'] or '(unset)'} → {c['after'] or '(unset)'}" for c in changes)


def _what_changed(night: Night) -> list[str]:
    """The provenance diff across the change of each regressed or failed cell."""
    table = night.table
    part = table[table["verdict"].isin(FAILING) & table["changed_at"].notna()]
    if part.empty:
        return []
    lines = ["", "### What changed (the night before the change against the night it began)", ""]
    for _, r in part.iterrows():
        where = f"{r['host']} {_cell_config(r)} c{_f(r['concurrency'], '.0f')}"
        lines.append(
            f"- {where} (since {r['changed_at']}): {changes_text(r['provenance'])}".replace("|", "\\|")
        )
    return lines


def _config(value: object) -> str:
    """A recommended config for display: none where no config qualified."""
    return value if isinstance(value, str) else "none"


def _recommendation(r: dict[str, Any]) -> str:
    """One recommendation change in one line: `c4: s2 -> s3 (against n6; why; SLA)`."""
    where = f"{r['host']} {r['engine']} {_model(r['model'])}"
    if isinstance(r.get("workload"), str) and r["workload"]:
        where += f" ({r['workload']})"
    if r["change"] == "not_recorded":
        return f"{where}: not compared, {r['latest_reason']}"
    level, old, new = f"c{int(r['concurrency'])}", _config(r["previous_config"]), _config(r["latest_config"])
    what = {
        "changed": f"{level}: {old} -> {new}",
        "new": f"{level} (new level): {new}",
        "gone": f"{level} (level gone): was {old}",
    }[r["change"]]
    sweep = r["previous_sweep"]
    against = f"against {sweep}" if isinstance(sweep, str) else "first sweep of this host, engine and model"
    why = _text(r["previous_reason"] if r["change"] == "gone" else r["latest_reason"])
    before, now = recommendations.side_sla(r, "previous"), recommendations.side_sla(r, "latest")
    sla = now if r["change"] != "gone" else before
    shown = f"; {sla.describe()}" if sla.given else ""
    if r["change"] == "changed" and before != now:
        shown = f"; {now.describe()}, was {before.describe()}"
    return f"{where} {what} ({against}; {why}{shown})"


def _recommendations(night: Night) -> list[str]:
    """Information: the recommended config per load level, where it differs from the previous sweep."""
    changes = night.recommendations
    if changes.empty:
        return []
    return [
        "",
        f"### Recommendation changes ({len(changes)}; information, not a failure)",
        "",
        "What `python -m analysis recommend` would deploy at each load level, against the previous sweep"
        " that measured the same host, engine and model:",
        "",
        *(f"- {_recommendation(r)}" for r in changes.to_dict("records")),
    ]


def _deployed(night: Night) -> list[str]:
    """Information: each host's deployed config against what the night recommends at its level."""
    table = night.deployed
    if table.empty:
        return []
    return [
        "",
        f"### Deployed configs ({int(table['redeploy'].sum())} to redeploy; information, not a failure)",
        "",
        f"Where the night recommends another config more than {deployments.MOVED_PCT:g}% faster than the"
        f" deployed one on its own numbers, redeploy (`deploy.yml -e from=results/{night.latest}`):",
        "",
        *(
            f"- {r['host']} c{int(r['concurrency'])}: {r['config']} of {r['sweep_id']} deployed;"
            f" tonight {deployments.recommended_now(r)}"
            for _, r in table.iterrows()
        ),
    ]


# The summary's sections in order; a later section (an information part) is one more function.
PARTS: tuple[Callable[[Night], list[str]], ...] = (
    _summary, _tables, _what_changed, _recommendations, _deployed
)  # fmt: skip


def markdown(night: Night) -> str:
    """The night as a Markdown summary: counts first, one table per kind of verdict, then information."""
    return "\n".join(line for part in PARTS for line in part(night)) + "\n"


def _message(r: pd.Series) -> str:
    """One line saying what happened to a cell."""
    verdict, base = r["verdict"], f"{_f(r['baseline_tps'], '.1f')} tok/s"
    if verdict in ("regressed", "improved", "unchanged"):
        text = f"{verdict}: {_f(r['latest_tps'], '.1f')} tok/s vs {base}, {_change(r)}"
        if verdict != "unchanged":
            text += f" since {r['changed_at']} ({r['rule']}; component {r['component']})"
        if verdict == "regressed":
            text += f"; what changed: {changes_text(r['provenance'])}"
        return text
    if verdict == "failed":
        return f"failed ({r['cause']}) since {r['changed_at']}; measured {base} before"
    if verdict == "version_changed":
        return (
            f"engine {r['previous_version']} -> {r['engine_version']}: {_f(r['latest_tps'], '.1f')} vs {base}"
        )
    if verdict == "missing":
        why = f" ({r['cause']})" if isinstance(r["cause"], str) else ""
        return f"not measured in the latest sweep{why}; last {base}"
    return f"new: {_f(r['latest_tps'], '.1f')} tok/s"


def write_junit(table: pd.DataFrame, latest: str, path: Path) -> None:
    """One testcase per cell: failure for regressed and failed cells, skipped for missing/version_changed."""
    failing = int(table["verdict"].isin(FAILING).sum())
    skipped = int(table["verdict"].isin(SKIPPED).sum())
    counts = {"tests": str(len(table)), "failures": str(failing), "errors": "0", "skipped": str(skipped)}
    suites = ET.Element("testsuites", {"name": "specsweep regress", **counts})
    suite = ET.SubElement(suites, "testsuite", {"name": f"specsweep.regress.{latest}", **counts})
    for _, r in table.iterrows():
        engine = f"{r['engine']} {r['engine_version']}"
        name = f"{_cell_config(r)} c{_f(r['concurrency'], '.0f')} {_model(r['model'])} ({engine})"
        case = ET.SubElement(
            suite, "testcase", {"classname": f"specsweep.{r['host']}", "name": name, "time": "0"}
        )
        message = _message(r)
        if r["verdict"] in FAILING:
            ET.SubElement(case, "failure", {"type": r["verdict"], "message": message}).text = message
        elif r["verdict"] in SKIPPED:
            ET.SubElement(case, "skipped", {"message": message})
        else:
            ET.SubElement(case, "system-out").text = message
    ET.indent(suites)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)


def _plain(value: Any) -> Any:
    """A table value as JSON: numpy scalars as Python ones, NaN and NA as null."""
    if isinstance(value, (list, dict, str)) or value is None:
        return value
    if pd.isna(value):
        return None
    value = value.item() if isinstance(value, np.generic) else value
    return None if isinstance(value, float) and math.isnan(value) else value


RENAMED = {"config_id": "config", "provenance": "provenance_diff"}


def noise_json(priors: Priors) -> dict[str, dict[str, Any]]:
    """The shared noise per series (HARMFUL): cells it was fitted on (0: none, each cell used its
    own), its CV in % and what it is worth in nights (the prior's degrees of freedom)."""
    shared = {name: priors.get(name, NO_PRIOR) for name in HARMFUL}
    return {name: {"cells": p.cells, "cv_pct": p.cv_pct, "df": p.df} for name, p in shared.items()}


def to_json(night: Night) -> dict[str, Any]:
    """The night as a JSON document: the sweep, the settings, the shared noise, the counts, one object
    per cell, and the recommendation changes (recommendations.as_json)."""
    table = night.table
    cells = [{RENAMED.get(c, c): _plain(r[c]) for c in COLUMNS} for r in table.to_dict("records")]
    counts = table["verdict"].value_counts()
    return {
        "sweep": night.latest,
        "settings": night.settings.as_dict(),
        "noise": noise_json(night.noise),
        "counts": {v: int(counts.get(v, 0)) for v in VERDICTS},
        "cells": cells,
        "recommendations": recommendations.as_json(night.recommendations),
        "deployed": json.loads(night.deployed.to_json(orient="records")) if len(night.deployed) else [],
    }


def write_json(night: Night, path: Path) -> None:
    """Write `to_json` to a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_json(night), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
