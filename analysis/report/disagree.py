"""Where the objectives disagree: a config's verdict on the objective ranked on, against another
objective's median (analysis.objectives), for the report's footnote."""

from __future__ import annotations

import pandas as pd

from analysis import objectives
from analysis.report.compare import GROUP, is_baseline


def _pct(ratio: float) -> str:
    """A ratio as a signed % change."""
    return f"{(ratio - 1.0) * 100.0:+.1f}%"


def disagreements(step: pd.DataFrame) -> list[str]:
    """One line per config whose verdict against the baseline on the ranked objective is better or
    worse while another objective's median goes the other way (the step table with
    analysis.report.sla's columns): `gpu-a c4 s1: wins on throughput (+12.0%), loses on per_user (-8.1%)`.
    """
    if step.empty or "objective" not in step.columns:
        return []
    ranked = objectives.get(str(step["objective"].iloc[0]))
    others = [o for o in objectives.OBJECTIVES.values() if o is not ranked and o.column in step.columns]
    base = is_baseline(step)
    columns = [o.column for o in others]
    ref = step.loc[base, [*GROUP, *columns]].drop_duplicates(GROUP)
    ref = ref.rename(columns={c: f"b_{c}" for c in columns})
    decided = step[step["verdict"].isin(["better", "worse"]) & ~base]
    rows = decided.astype({k: "object" for k in GROUP if k != "concurrency"}).merge(
        ref.astype({k: "object" for k in GROUP if k != "concurrency"}), on=GROUP, how="left"
    )
    lines = []
    wanted = [*GROUP, "config", "verdict", "speedup_pct", *columns, *(f"b_{c}" for c in columns)]
    for r in rows[wanted].to_dict("records"):
        wins = r["verdict"] == "better"
        ratios = {o.name: r[o.column] / r[f"b_{o.column}"] for o in others}
        # Only a median on the other side of 1 (NaN: not measured, as goodput without an SLA).
        against = [
            f"{n} ({_pct(x)})" for n, x in ratios.items() if pd.notna(x) and x != 1.0 and (x < 1.0) == wins
        ]
        if against:
            where = f"{r['host']} c{r['concurrency']:g}"
            load = f" {r['workload']}" if isinstance(r["workload"], str) else ""
            say, other = ("wins", "loses") if wins else ("loses", "wins")
            lines.append(
                f"{where}{load} {r['config']}: {say} on {ranked.name} ({r['speedup_pct']:+.1f}%), "
                f"{other} on {', '.join(against)} by median"
            )
    return lines
