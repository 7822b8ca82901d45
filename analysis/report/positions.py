"""Acceptance per draft position, where the engine reports it: SGLang's per-request histogram.

SGLang counts, per request, the verify steps that accepted k drafts (meta_info
`spec_correct_drafts_histogram`, the bonus token not counted); the client sums it over a run's
requests (SpecStats.accepted_histogram), so each (workload, level, repeat) has its own. A draft at
position k is accepted exactly when its step accepts k or more, so the share of steps that accepted
at least k is the acceptance at position k, and 1 + their sum is the tokens a step yields. llama.cpp
reports totals only: its rows have no histogram, and the view is left out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from analysis.report.compare import GROUP
from analysis.report.deploy import host_blocks
from analysis.report.render import MISSING, Block, num

COLUMNS = [*GROUP, "config", "verify_steps", "tokens_per_step", "by_position"]
NOTE = (
    "pos k: share of verify steps whose draft at position k was accepted (SGLang's per-request "
    "spec_correct_drafts_histogram, summed over the repeats); tokens/step = 1 + their sum"
)


def by_position(histogram: Sequence[int], drafts: int | None = None) -> list[float]:
    """Acceptance at positions 1..: the share of steps that accepted at least k drafts, up to
    `drafts` positions (the drafts proposed per step; default: the most any step accepted)."""
    counts = np.asarray(histogram, dtype="float64")
    total = counts.sum()
    if total <= 0:
        return []
    at_least = np.cumsum(counts[::-1])[::-1][1:] / total
    width = len(at_least) if drafts is None else drafts
    return [float(at_least[k]) if k < len(at_least) else 0.0 for k in range(width)]


def _summed(histograms: pd.Series) -> tuple[int, ...]:
    """Histograms added position by position."""
    width = max(len(h) for h in histograms)
    return tuple(sum(h[k] for h in histograms if k < len(h)) for k in range(width))


def position_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per step-table group and config whose good runs carry a histogram: the verify steps,
    the tokens per step and the acceptance by position (a list)."""
    ok = runs[
        runs["run_ok"].astype("boolean").fillna(False).astype(bool) & runs["accepted_histogram"].notna()
    ]
    if ok.empty:
        return pd.DataFrame(columns=COLUMNS)
    cells = (
        ok.groupby([*GROUP, "config_id"], dropna=False, sort=False, observed=True)
        .agg(
            histogram=("accepted_histogram", _summed),
            drafted=("drafted", "sum"),
            steps=("verify_steps", "sum"),
        )
        .reset_index()
        .rename(columns={"config_id": "config"})
    )
    # Drafts proposed per step (SGLang: draft tokens - 1), so a position no step reached reads 0.
    drafts = (cells["drafted"] / cells["steps"].where(cells["steps"] > 0)).round()
    cells["by_position"] = [
        by_position(h, None if pd.isna(d) else int(d))
        for h, d in zip(cells["histogram"], drafts, strict=True)
    ]
    cells["verify_steps"] = [sum(h) for h in cells["histogram"]]
    cells["tokens_per_step"] = [1.0 + sum(r) for r in cells["by_position"]]
    return cells[COLUMNS].sort_values([*GROUP, "config"], kind="stable", ignore_index=True)


def position_blocks(table: pd.DataFrame) -> list[Block]:
    """Per host group: each level and config's acceptance by draft position."""
    if table.empty:
        return []
    width = max(len(r) for r in table["by_position"])
    columns = {
        "concurrency": (True, [str(c) for c in table["concurrency"].tolist()]),
        "config": (False, table["config"].astype(str).tolist()),
        "verify steps": (True, [str(n) for n in table["verify_steps"].tolist()]),
        "tokens/step": (True, num(table["tokens_per_step"], ".2f")),
        **{
            f"pos {k + 1}": (True, [f"{r[k]:.2f}" if k < len(r) else MISSING for r in table["by_position"]])
            for k in range(width)
        },
    }
    return host_blocks(table, columns, "accept by draft position", NOTE)
