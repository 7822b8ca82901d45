"""The config `recommend` would deploy at each load level, kept in the history and compared night to night.

At `ingest`, each sweep's recommendation per host group (host, engine, model) and concurrency is
made by analysis.report.recommend from the report's step table, exactly as the `recommend`
subcommand makes it (with the SLA given to ingest), and stored one row per level in the history's
`recommendations` table; ingesting a sweep again replaces the rows of the levels it measured.

`regress` compares the judged sweep's levels with those of the previous sweep that measured the
same host group: a level whose recommended config changed, a new level and a level gone are listed
(change `changed`, `new`, `gone`) as information: they never fail the night. A host group measured
by the sweep before the judged one and absent from it has its levels gone. Where one of the two
sweeps was ingested before the history kept recommendations, the host group is named once (change
`not_recorded`, no level) rather than compared.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from analysis import objectives
from analysis.facts.load import LoadResult
from analysis.objectives import Objective
from analysis.report.cli import build_tables
from analysis.report.recommend import recommend
from analysis.report.sla import Sla

GROUP = ["host", "engine", "model", "workload"]  # workload '': the one prompt set
LEVEL = [*GROUP, "concurrency"]
# Stored per level besides its key: the config (NULL: none qualified), its numbers, why, and the SLA.
VALUES = {
    "config": "TEXT", "decode_tps": "REAL", "speedup_pct": "REAL", "speedup_ci_lo": "REAL",
    "speedup_ci_hi": "REAL", "meets_sla": "INTEGER", "goodput_rps": "REAL", "reason": "TEXT",
    "sla_ttft_p99_ms": "REAL", "sla_itl_p99_ms": "REAL", "objective": "TEXT",
}  # fmt: skip
FIELDS = ["sweep_id", *LEVEL, *VALUES]
TABLE = f"""
CREATE TABLE IF NOT EXISTS recommendations (
    sweep_id TEXT NOT NULL, host TEXT NOT NULL, engine TEXT NOT NULL, model TEXT NOT NULL,
    workload TEXT NOT NULL DEFAULT '', concurrency INTEGER NOT NULL,
    {", ".join(f"{name} {kind}" for name, kind in VALUES.items())},
    PRIMARY KEY (sweep_id, host, engine, model, workload, concurrency));
"""
# One row per listed change; previous_* / latest_* are the two sweeps' stored values.
SIDE = ["config", "decode_tps", "reason", "sla_ttft_p99_ms", "sla_itl_p99_ms"]
CHANGES = [
    *LEVEL, "change", "previous_sweep", *(f"{side}_{c}" for side in ("previous", "latest") for c in SIDE),
]  # fmt: skip


def compute(result: LoadResult, sla: Sla, objective: Objective = objectives.DEFAULT) -> pd.DataFrame:
    """The loaded sweeps' recommendation as stored: one row per (sweep, host group, concurrency),
    with the objective it ranked on."""
    rec = recommend(build_tables(result, sla=sla, objective=objective).step)
    rec = rec.assign(
        workload=rec["workload"].astype(object).fillna(""),
        meets_sla=rec["meets_sla"].astype("boolean").astype("Int64"),
        sla_ttft_p99_ms=sla.ttft_p99_ms,
        sla_itl_p99_ms=sla.itl_p99_ms,
    )
    return rec[FIELDS]


def _flag(frame: pd.DataFrame, keys: pd.DataFrame, on: list[str]) -> pd.Series:
    """Per row of `frame`: whether its `on` columns are among the rows of `keys`."""
    found = frame[on].merge(keys[on].drop_duplicates(), on=on, how="left", indicator=True)
    return pd.Series(found["_merge"].eq("both").to_numpy(), index=frame.index)


def _pairs(tables: dict[str, pd.DataFrame], latest: str) -> pd.DataFrame:
    """The host groups to compare: each with its previous sweep and whether each side was recorded."""
    order = {sweep: i for i, sweep in enumerate(tables["sweeps"]["sweep_id"])}
    rank = order[latest]
    seen = tables["runs"][["sweep_id", *GROUP]].drop_duplicates()
    seen = seen.assign(rank=seen["sweep_id"].map(order))
    now = seen[seen["rank"] == rank]
    groups = pd.concat([now, seen[seen["rank"] == rank - 1]])[GROUP].drop_duplicates()
    previous = (
        seen[seen["rank"] < rank]
        .sort_values("rank", kind="stable")
        .drop_duplicates(GROUP, keep="last")[[*GROUP, "sweep_id"]]
        .rename(columns={"sweep_id": "previous_sweep"})
    )
    pairs = groups.merge(previous, on=GROUP, how="left").reset_index(drop=True)
    recorded = tables["recommendations"][["sweep_id", *GROUP]]
    with_previous = pairs.rename(columns={"previous_sweep": "sweep_id"})
    with_latest = pairs.assign(sweep_id=latest)
    return pairs.assign(
        measured=_flag(pairs, now, GROUP),
        previous_recorded=_flag(with_previous, recorded, ["sweep_id", *GROUP]),
        latest_recorded=_flag(with_latest, recorded, ["sweep_id", *GROUP]),
    )


def _side(frame: pd.DataFrame, side: str) -> pd.DataFrame:
    """A sweep's stored levels with their values renamed `<side>_<column>`."""
    return frame[[*LEVEL, *SIDE]].rename(columns={c: f"{side}_{c}" for c in SIDE})


def changes(tables: dict[str, pd.DataFrame], latest: str) -> pd.DataFrame:
    """The CHANGES of `latest`'s recommendation against each host group's previous sweep (module doc)."""
    pairs = _pairs(tables, latest)
    unrecorded = (pairs["previous_sweep"].notna() & ~pairs["previous_recorded"]) | (
        pairs["measured"] & ~pairs["latest_recorded"]
    )
    recs = tables["recommendations"]
    compared = pairs.loc[~unrecorded, [*GROUP, "previous_sweep"]]
    before = compared.merge(recs, left_on=[*GROUP, "previous_sweep"], right_on=[*GROUP, "sweep_id"])
    after = compared[GROUP].merge(recs[recs["sweep_id"] == latest], on=GROUP)
    both = _side(before, "previous").merge(_side(after, "latest"), on=LEVEL, how="outer", indicator=True)
    both = both.merge(compared, on=GROUP, how="left")
    old, new = both["previous_config"], both["latest_config"]
    same = (old == new) | (old.isna() & new.isna())
    both["change"] = both.pop("_merge").map({"both": "changed", "left_only": "gone", "right_only": "new"})
    listed = both[both["change"].ne("changed") | ~same]
    # One row per host group whose previous (or judged) sweep has runs but no stored recommendation.
    gap = pairs[unrecorded]
    blind = gap["previous_sweep"].where(gap["previous_sweep"].notna() & ~gap["previous_recorded"], latest)
    never = gap.assign(
        change="not_recorded",
        concurrency=float("nan"),
        latest_reason=blind + " was ingested before the history kept recommendations",
    )
    parts = [frame for frame in (listed, never) if len(frame)]
    if not parts:
        return pd.DataFrame(columns=CHANGES)
    out = pd.concat(parts, ignore_index=True).reindex(columns=CHANGES)
    return out.sort_values(LEVEL, kind="stable", na_position="first").reset_index(drop=True)


def side_sla(r: dict[str, Any], side: str) -> Sla:
    """The SLA one side (previous or latest) of a CHANGES row was recommended under."""
    ttft, itl = (r[f"{side}_sla_{name}"] for name in ("ttft_p99_ms", "itl_p99_ms"))
    return Sla(None if pd.isna(ttft) else float(ttft), None if pd.isna(itl) else float(itl))


def _sla_json(sla: Sla) -> dict[str, float | None]:
    """An SLA as JSON, as `recommend --format json` writes it (nulls: not given)."""
    return {"ttft_p99_ms": sla.ttft_p99_ms, "itl_p99_ms": sla.itl_p99_ms}


def as_json(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The changes as JSON objects: {host, engine, model, concurrency, change, previous, latest, ...}."""

    def text(value: Any) -> str | None:
        return value if isinstance(value, str) else None

    def number(value: Any) -> float | None:
        return None if value is None or pd.isna(value) else float(value)

    return [
        {
            **{c: text(r[c]) for c in GROUP},
            "concurrency": None if pd.isna(r["concurrency"]) else int(r["concurrency"]),
            "change": r["change"],
            "previous_sweep": text(r["previous_sweep"]),
            "previous": text(r["previous_config"]),
            "latest": text(r["latest_config"]),
            "previous_tok_s": number(r["previous_decode_tps"]),
            "latest_tok_s": number(r["latest_decode_tps"]),
            "previous_sla": _sla_json(side_sla(r, "previous")),
            "latest_sla": _sla_json(side_sla(r, "latest")),
            "reason": text(r["latest_reason"]) or text(r["previous_reason"]),
        }
        for r in table.to_dict("records")
    ]
