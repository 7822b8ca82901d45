"""The latest night as a node_exporter textfile-collector file, for the dashboards ops already have.

Gauges per cell (labels host, engine, model, config, concurrency): the night's decode tok/s,
accept length and time per verify step (seconds, the base unit), the change the verdict measured,
and the verdict and its component as state sets (one series per state, 1 for the current one), so
`specsweep_regress_verdict{verdict="regressed"} == 1` is an alert rule. A value the night does not
have (no accept length without speculation) is left out rather than written as NaN. The file is
written next to its final name and renamed over it: the collector never reads half a file.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd

from analysis.nightly.judge import COMPONENTS, VERDICTS

LABELS = {
    "host": "host",
    "engine": "engine",
    "model": "model",
    "config": "config_id",
    "concurrency": "concurrency",
}
# (metric, help, column, factor to the base unit)
GAUGES = [
    ("specsweep_decode_tokens_per_second", "Median decode tok/s of the judged night.", "latest_tps", 1.0),
    ("specsweep_accept_length", "Median accept length of the judged night.", "accept_length", 1.0),
    ("specsweep_verify_step_seconds", "Median verify step time of the judged night.", "step_time_ms", 1e-3),
    ("specsweep_regress_change_ratio", "Decode tok/s change the verdict measured (-0.05: 5% slower).",
     "change_pct", 1e-2),
]  # fmt: skip
# (metric, label and column, states, help): one series per state, 1 for the cell's own.
STATE_SETS = [
    ("specsweep_regress_verdict", "verdict", VERDICTS, "Verdict of the judged night (1: this one)."),
    ("specsweep_regress_component", "component", COMPONENTS, "What moved decode tok/s (1: this one)."),
]


def _escape(value: object) -> str:
    """A label value as the exposition format quotes it."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(r: pd.Series, **extra: str) -> str:
    """{name="value",...} of one cell, plus extra labels."""
    pairs = {name: _label_value(r[column]) for name, column in LABELS.items()}
    if isinstance(r.get("workload"), str) and r["workload"]:  # the one prompt set: no label, as before
        pairs["workload"] = r["workload"]
    pairs |= extra
    return "{" + ",".join(f'{name}="{_escape(value)}"' for name, value in pairs.items()) + "}"


def _label_value(value: object) -> str:
    """A label value: whole numbers without a decimal point (concurrency 1, not 1.0)."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _family(name: str, help_text: str, samples: list[str]) -> list[str]:
    """HELP and TYPE lines, then the samples (a family without samples is left out)."""
    return [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", *samples] if samples else []


def exposition(table: pd.DataFrame, night_started_at: float | None) -> str:
    """The textfile's content."""
    lines: list[str] = []
    rows = [r for _, r in table.iterrows()]
    for name, help_text, column, factor in GAUGES:
        samples = [f"{name}{_labels(r)} {float(r[column]) * factor!r}" for r in rows if pd.notna(r[column])]
        lines += _family(name, help_text, samples)
    for name, label, states, help_text in STATE_SETS:
        samples = [
            f"{name}{_labels(r, **{label: state})} {int(r[label] == state)}" for r in rows for state in states
        ]
        lines += _family(name, help_text, samples)
    if night_started_at is not None and not math.isnan(night_started_at):
        lines += _family(
            "specsweep_regress_night_start_timestamp_seconds",
            "When the judged night's sweep started (Unix time).",
            [f"specsweep_regress_night_start_timestamp_seconds {float(night_started_at)!r}"],
        )
    return "\n".join(lines) + "\n"


def write(table: pd.DataFrame, night_started_at: float | None, path: Path) -> None:
    """Write the textfile atomically (a temporary file in the same folder, renamed over `path`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(exposition(table, night_started_at), encoding="utf-8")
    os.replace(partial, path)
