"""Racing and finalists: which configs the launches so far already decide, from one host's facts.

F-race (Birattari et al., irace) drops a candidate as soon as it is significantly worse than the
best, and spends the saved evaluations on the survivors. Here a candidate is a config, an
evaluation a launch, and "significantly worse" is this: at every concurrency level, the 95%
interval of the config's tok/s over the best config's (Welch t on log tok/s of every repeat of
every launch so far, analysis.stats.log_ratio_ci; a repeat's tok/s is its requests' median decode
tok/s, as in the report's table) lies entirely below 0. The comparison is with the
best directly, not two intervals against the baseline: both would share the baseline's noise, and
the best's own estimate is the one most flattered by noise (the winner's curse), so a config is
dropped only when it loses to the best's repeats themselves. Without 2 repeats on both sides there
is no interval and nothing is dropped.

Finalists are the survivors when the sweep ends: the best at some level and every config within
noise of it there (its interval against the best holds 0, or there is none). They are launched once
more before a winner is named.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import stats
from analysis.facts.schema import Fact, decode_fact, to_dict


def facts(host_dir: Path) -> list[Fact]:
    """Every readable fact of one host's folder."""
    found = []
    for path in sorted(host_dir.glob("*.json")):
        try:
            found.append(decode_fact(path.read_bytes()))
        except (OSError, ValueError):
            continue
    return found


def samples(found: Iterable[Fact], max_launch: int | None = None) -> pd.DataFrame:
    """Decode tok/s of every good repeat (the median of its requests', the number the table's
    speedup is of): columns config_id, launch, concurrency, tps."""
    rows = [
        (f.config.id, f.launch_index, r.concurrency, statistics.median(tps))
        for f in found
        if f.status == "ok" and (max_launch is None or f.launch_index <= max_launch)
        for r in f.runs
        if not any(q.error for q in r.requests)
        and (tps := [q.decode_tps for q in r.requests if q.decode_tps is not None and q.decode_tps > 0])
    ]
    return pd.DataFrame(rows, columns=["config_id", "launch", "concurrency", "tps"])


def against_best(data: pd.DataFrame) -> pd.DataFrame:
    """Per (concurrency, config): the best config there and the 95% interval, in %, of config/best."""
    data = data.assign(log=np.log(data["tps"]))
    per = data.groupby(["concurrency", "config_id"])["log"].agg(["count", "var", "median"]).reset_index()
    per["tps"] = np.exp(per["median"])
    best = per.loc[per.groupby("concurrency")["tps"].idxmax()].set_index("concurrency")
    b = best.loc[per["concurrency"]]
    point = pd.Series(per["tps"].to_numpy() / b["tps"].to_numpy(), index=per.index)
    n = per["count"].astype("float64")
    n_best = pd.Series(b["count"].to_numpy(), index=per.index).astype("float64")
    var_best = pd.Series(b["var"].to_numpy(), index=per.index)
    lo, hi = stats.log_ratio_ci(point, per["var"] / n, n - 1, var_best / n_best, n_best - 1)
    return per.assign(best=b["config_id"].to_numpy(), lo=lo, hi=hi, pct=(point - 1) * 100)


def raced_out(data: pd.DataFrame, config_id: str) -> str | None:
    """Why `config_id` stops here (its interval against the best is below 0 at every level it was
    measured at), or None while it may still win somewhere."""
    if data.empty or config_id not in set(data["config_id"]):
        return None
    table = against_best(data)
    mine = table[table["config_id"] == config_id]
    if not (mine["best"] != config_id).all() or not (mine["hi"] < 0).all():
        return None
    return "; ".join(
        f"c={c}: {p:+.1f}% [{lo:+.1f}, {hi:+.1f}] vs {best}"
        for c, p, lo, hi, best in mine[["concurrency", "pct", "lo", "hi", "best"]].itertuples(index=False)
    )


def finalists(data: pd.DataFrame, candidates: Collection[str]) -> list[str]:
    """The candidates that are best at some level or within noise of the best there, in order."""
    if data.empty:
        return []
    table = against_best(data)
    alive = table[(table["best"] == table["config_id"]) | ~(table["hi"] < 0)]
    chosen = set(alive["config_id"])
    return [c for c in candidates if c in chosen]


def skipped_fact(previous: Fact, launch: int, reason: str, now: float) -> dict:
    """The record of a launch racing did not run: the config's last fact, as `skipped`, without numbers."""
    doc = to_dict(previous)
    doc.update(
        launch_index=launch, status="skipped", raced_out=reason, runs=[], benchmark=None, failure=None,
        server_info={}, timings={"started_at": now, "finished_at": now},
    )  # fmt: skip
    return doc


def saved(sweep_dir: Path, hosts: Iterable[str]) -> str:
    """The end-of-sweep line: launches racing did not run and about how long they would have taken."""
    skipped, seconds, gpu_seconds = [], 0.0, 0.0
    for host in hosts:
        found = facts(sweep_dir / host)
        took: dict[str, list[float]] = {}
        for f in found:
            if f.status == "ok":
                took.setdefault(f.config.id, []).append(f.timings.finished_at - f.timings.started_at)
        for f in found:
            if f.raced_out:
                launch_s = float(np.mean(took.get(f.config.id) or [0.0]))
                skipped.append(f"{host}/{f.config.id}.launch{f.launch_index}")
                seconds += launch_s
                gpu_seconds += launch_s * len(f.host_facts.gpus)
    if not skipped:
        return ""
    return (
        f"racing: {len(skipped)} launch(es) not run ({', '.join(skipped)}), saving about "
        f"{seconds / 60:.1f} launch-minutes, {gpu_seconds / 60:.1f} GPU-minutes"
    )


def previous_fact(host_dir: Path, config_id: str) -> Fact | None:
    """The config's latest fact on this host (the one a skipped launch copies)."""
    mine = [f for f in facts(host_dir) if f.config.id == config_id]
    return max(mine, key=lambda f: f.launch_index) if mine else None


def relaunched(sweep_dir: Path, hosts: Iterable[str], launches: int) -> str:
    """The end-of-sweep line naming the finalists' extra launches (after launch `launches`, or a
    step search's launch 2 of a probe); '' when there were none."""
    names = [
        f"{host}/{f.config.id}.launch{f.launch_index}"
        for host in hosts
        for f in facts(sweep_dir / host)
        if f.config.speculative and f.launch_index > launches and f.raced_out is None
    ]
    if not names:
        return ""
    return f"finalists launched once more before the winner was named: {', '.join(sorted(names))}"
