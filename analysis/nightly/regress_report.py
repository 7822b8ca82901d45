"""What `regress` hands to people and CI: a Markdown summary and a JUnit XML file."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from analysis.nightly.regress import Settings

MISSING = "–"
SECTIONS = [
    ("regression", "Regressions"),
    ("failed", "Failed in the latest sweep (measured before)"),
    ("improvement", "Improvements"),
    ("version_changed", "Engine version changed (not compared across versions)"),
    ("new", "New configs"),
    ("missing", "Missing from the latest sweep"),
]


def _f(value: object, fmt: str) -> str:
    """A number for display, a dash when missing."""
    return MISSING if value is None or pd.isna(value) else format(value, fmt)


def _model(value: object) -> str:
    """A model path shortened to its last component."""
    return str(value).rstrip("/").rsplit("/", 1)[-1]


def _row(r: pd.Series) -> list[str]:
    """One verdict as Markdown table cells."""
    version = str(r["engine_version"])
    if isinstance(r["previous_version"], str):
        version = f"{r['previous_version']} → {version}"
    n = "" if pd.isna(r["n_previous"]) else f" (n={int(r['n_previous'])})"
    change = _f(r["change_pct"], "+.1f") + ("%" if pd.notna(r["change_pct"]) else "")
    band = "±" + _f(r["band_tps"], ".2f") if pd.notna(r["band_tps"]) else MISSING
    cause = str(r["cause"]) if isinstance(r["cause"], str) else ""
    return [
        str(r["host"]), str(r["engine"]), version, _model(r["model"]), str(r["config_id"]),
        _f(r["concurrency"], ".0f"), _f(r["latest_tps"], ".1f"), _f(r["baseline_tps"], ".1f") + n,
        change, band, cause,
    ]  # fmt: skip


HEADER = ["host", "engine", "version", "model", "config", "conc", "latest tok/s", "baseline tok/s",
          "change", "noise band", "cause"]  # fmt: skip


def markdown(table: pd.DataFrame, latest: str, s: Settings) -> str:
    """The verdicts as a Markdown summary: counts first, then one table per kind of change."""
    counts = table["status"].value_counts()
    lines = [
        f"## specsweep regress: sweep {latest}",
        "",
        f"Each cell's median decode tok/s against the median of its previous {s.window} sweep(s) (same engine"
        f" version); a change counts when it exceeds {s.threshold * 100:g}% and {s.mad_k:g} x MAD of those.",
        "",
        f"**{counts.get('regression', 0)} regression(s)**, {counts.get('failed', 0)} failed,"
        f" {counts.get('improvement', 0)} improvement(s), {counts.get('unchanged', 0)} unchanged,"
        f" {counts.get('new', 0)} new, {counts.get('missing', 0)} missing,"
        f" {counts.get('version_changed', 0)} engine-version change(s).",
    ]
    for status, heading in SECTIONS:
        part = table[table["status"] == status]
        if part.empty:
            continue
        lines += ["", f"### {heading} ({len(part)})", "", "| " + " | ".join(HEADER) + " |"]
        lines.append(
            "|" + "|".join("---:" if h in ("conc", "change") or "tok/s" in h else "---" for h in HEADER) + "|"
        )
        lines += [
            "| " + " | ".join(c.replace("|", "\\|") for c in _row(r)) + " |" for _, r in part.iterrows()
        ]
    return "\n".join(lines) + "\n"


def _message(r: pd.Series) -> str:
    """One line saying what happened to a cell."""
    base = f"{_f(r['baseline_tps'], '.1f')} tok/s"
    if r["status"] in ("regression", "improvement", "unchanged"):
        latest, n = _f(r["latest_tps"], ".1f"), int(r["n_previous"])
        return (
            f"{r['status']}: {latest} tok/s vs {base} over {n} sweep(s),"
            f" {_f(r['change_pct'], '+.1f')}%, noise band ±{_f(r['band_tps'], '.2f')}"
        )
    if r["status"] == "failed":
        return f"failed ({r['cause']}); measured {base} before"
    if r["status"] == "version_changed":
        return (
            f"engine {r['previous_version']} -> {r['engine_version']}: {_f(r['latest_tps'], '.1f')} vs {base}"
        )
    if r["status"] == "missing":
        why = f" ({r['cause']})" if isinstance(r["cause"], str) else ""
        return f"not measured in the latest sweep{why}; last {base}"
    return f"new: {_f(r['latest_tps'], '.1f')} tok/s"


def write_junit(table: pd.DataFrame, latest: str, path: Path) -> None:
    """One testcase per cell: failure for regressions and failed configs, skipped for missing/changed."""
    failing = int(table["status"].isin(["regression", "failed"]).sum())
    skipped = int(table["status"].isin(["missing", "version_changed"]).sum())
    counts = {"tests": str(len(table)), "failures": str(failing), "errors": "0", "skipped": str(skipped)}
    suites = ET.Element("testsuites", {"name": "specsweep regress", **counts})
    suite = ET.SubElement(suites, "testsuite", {"name": f"specsweep.regress.{latest}", **counts})
    for _, r in table.iterrows():
        engine = f"{r['engine']} {r['engine_version']}"
        name = f"{r['config_id']} c{_f(r['concurrency'], '.0f')} {_model(r['model'])} ({engine})"
        case = ET.SubElement(
            suite, "testcase", {"classname": f"specsweep.{r['host']}", "name": name, "time": "0"}
        )
        message = _message(r)
        if r["status"] in ("regression", "failed"):
            ET.SubElement(case, "failure", {"type": r["status"], "message": message}).text = message
        elif r["status"] in ("missing", "version_changed"):
            ET.SubElement(case, "skipped", {"message": message})
        else:
            ET.SubElement(case, "system-out").text = message
    ET.indent(suites)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)
