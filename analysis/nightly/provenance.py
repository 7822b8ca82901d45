"""What each config of a night ran with, and what changed between two nights.

One row per (sweep, host, config), taken from its fact when the sweep is ingested: the engine
version, the model and its file identity, the GPU driver and CUDA version, the launch env (NCCL
and every other variable the sweep set), the argv and the suite's git revision. Lists and
objects are stored as canonical JSON text (sorted keys), so equal means unchanged.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import pandas as pd

from analysis.facts.load import read_fact
from analysis.facts.schema import Fact

KEY = ("sweep_id", "host", "config_id")
# Columns after the key, in the order a diff lists them.
FIELDS = (
    "engine_version",
    "model",
    "model_identity",
    "gpu_driver",
    "cuda_version",
    "env",
    "argv",
    "suite_rev",
)
JSON_FIELDS = ("model_identity", "env", "argv")
Change = dict[str, str | None]  # {"field", "before", "after"}; None: unset / not recorded


def _canonical(value: Any) -> str | None:
    """A struct, list or mapping as JSON text with sorted keys; None stays None."""
    return None if value is None else msgspec.json.encode(msgspec.to_builtins(value), order="sorted").decode()


def of_fact(fact: Fact) -> dict[str, Any]:
    """The provenance row of one fact."""
    return {
        "sweep_id": fact.sweep_id,
        "host": fact.host,
        "config_id": fact.config.id,
        "engine_version": fact.engine.version,
        "model": fact.engine.model,
        # Optional in the schema (and absent from facts written before it): missing reads as None.
        "model_identity": _canonical(getattr(fact.engine, "model_identity", None)),
        "gpu_driver": fact.host_facts.gpu_driver,
        "cuda_version": fact.host_facts.cuda_version,
        "env": _canonical(fact.launch.env),
        "argv": _canonical(fact.launch.argv),
        "suite_rev": fact.suite.git_rev,
    }


def read(files: Iterable[Path]) -> pd.DataFrame:
    """Provenance rows of the fact files among `files` (SGLang JSONL files carry none)."""
    rows = []
    for path in files:
        if path.suffix != ".json":
            continue
        try:
            rows.append(of_fact(read_fact(path)))
        except (OSError, ValueError):  # the loader read it a moment ago; a file replaced since is skipped
            continue
    return pd.DataFrame(rows, columns=[*KEY, *FIELDS])


def _argv_change(before: list[str], after: list[str]) -> Change:
    """The argv tokens that differ, each run with the token before it (`--port 8080` -> `--port 8081`)."""
    removed: list[str] = []
    added: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes():
        if tag != "equal":
            removed.append(" ".join(before[max(i1 - 1, 0) : i2]))
            added.append(" ".join(after[max(j1 - 1, 0) : j2]))
    return {"field": "argv", "before": " … ".join(removed), "after": " … ".join(added)}


def _mapping_changes(field: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    """One change per key whose value differs (None: not set on that side)."""
    keys = sorted(set(before) | set(after))
    return [
        {"field": f"{field} {k}", "before": _text(before.get(k)), "after": _text(after.get(k))}
        for k in keys
        if before.get(k) != after.get(k)
    ]


def _text(value: Any) -> str | None:
    """A value for display: strings as they are, numbers and structures as JSON."""
    return value if value is None or isinstance(value, str) else json.dumps(value)


def diff(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[Change] | None:
    """What changed from one night's provenance to another's; None when either was not recorded."""
    if before is None or after is None:
        return None
    changes: list[Change] = []
    for field in FIELDS:
        old, new = before[field], after[field]
        if old == new:
            continue
        old_value, new_value = (json.loads(v) if field in JSON_FIELDS and v else v for v in (old, new))
        if isinstance(old_value, dict) and isinstance(new_value, dict):
            changes += _mapping_changes(field, old_value, new_value)
        elif field == "argv" and isinstance(old_value, list) and isinstance(new_value, list):
            changes.append(_argv_change(old_value, new_value))
        else:
            changes.append({"field": field, "before": _text(old_value), "after": _text(new_value)})
    return changes
