"""Read sweep folders of fact files into typed, tidy pandas frames."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis.schema import Fact, load_fact

RUN_COLUMNS = [
    "path", "sweep_id", "host", "engine", "engine_version", "model", "config_id",
    "speculative", "algorithm", "steps", "topk", "draft_tokens", "env_profile", "status",
    "concurrency", "repeat", "duration_s", "n_requests", "n_errors", "run_ok", "failed",
    "cause", "message", "decode_tps", "ttft_s", "itl_s", "output_tokens",
    "accept_length", "accept_rate", "drafted", "accepted", "fact_id", "run_index",
]  # fmt: skip
REQUEST_COLUMNS = [
    "fact_id", "run_index", "sweep_id", "host", "config_id", "concurrency", "repeat",
    "prompt_id", "output_tokens", "ttft_s", "e2e_s", "decode_tps", "itl_s", "text", "error",
]  # fmt: skip
INT_COLUMNS = [
    "steps", "topk", "draft_tokens", "concurrency", "repeat", "drafted", "accepted",
    "n_requests", "n_errors", "output_tokens",
]  # fmt: skip
# Run columns computed from the request rows or from other columns, not read off a Run.
DERIVED = {
    "n_requests", "n_errors", "run_ok", "failed", "decode_tps", "ttft_s", "itl_s",
    "output_tokens",
}  # fmt: skip
KEYS = ["fact_id", "run_index"]


@dataclass
class LoadResult:
    """Facts that parsed, their runs and requests as frames, and the files that did not."""

    facts: dict[Path, Fact]
    runs: pd.DataFrame
    requests: pd.DataFrame
    problems: list[tuple[Path, str]] = field(default_factory=list)


def fact_paths(root: Path) -> list[Path]:
    """Fact files of one sweep folder (`<host>/<config_id>.json`); a file names itself."""
    if root.is_file():
        return [root]
    # Only host subfolders hold facts; plan.json / sweep.json sit at the sweep root.
    return sorted(p for p in root.glob("*/*.json") if p.is_file())


def read_fact(path: Path) -> Fact:
    """Parse one fact file; raises ValueError or OSError with a readable reason."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text: {exc.reason}") from exc
    return load_fact(data)


def _run_rows(fact_id: int, path: Path, fact: Fact) -> list[dict[str, object]]:
    """One row per run, plus one standing for the fact's failure, skip or missing runs."""
    c = fact.config
    base = {
        "fact_id": fact_id,
        "path": str(path),
        "sweep_id": fact.sweep_id,
        "host": fact.host,
        "engine": fact.engine.name,
        "engine_version": fact.engine.version,
        "model": fact.engine.model,
        "config_id": c.id,
        "speculative": c.speculative,
        "algorithm": c.algorithm,
        "steps": c.steps,
        "topk": c.topk,
        "draft_tokens": c.draft_tokens,
        "env_profile": c.env_profile,
        "status": fact.status,
    }
    rows: list[dict[str, object]] = [
        base
        | {
            "run_index": i,
            "concurrency": r.concurrency,
            "repeat": r.repeat,
            "duration_s": r.duration_s,
            "drafted": r.spec.drafted,
            "accepted": r.spec.accepted,
            "accept_length": r.spec.accept_length,
            "accept_rate": r.spec.accept_rate,
        }
        for i, r in enumerate(fact.runs)
    ]
    # A failure is data: its own row lets the table count it and show its cause. It has
    # no concurrency; compare.step_table spreads it over the levels the sweep measured.
    if fact.status != "ok" or not fact.runs:
        f = fact.failure
        cause = f.cause if f else ("skipped" if fact.status == "skipped" else "no_runs")
        rows.append(base | {"cause": cause, "message": f.message if f else None})
    return rows


def _request_rows(fact_id: int, fact: Fact) -> list[dict[str, object]]:
    """One row per request of every run of one fact."""
    return [
        {
            "fact_id": fact_id,
            "run_index": i,
            "sweep_id": fact.sweep_id,
            "host": fact.host,
            "config_id": fact.config.id,
            "concurrency": r.concurrency,
            "repeat": r.repeat,
            "prompt_id": q.prompt_id,
            "output_tokens": q.output_tokens,
            "ttft_s": q.ttft_s,
            "e2e_s": q.e2e_s,
            "decode_tps": q.decode_tps,
            "itl_s": q.itl_s,
            "text": q.text,
            "error": q.error,
        }
        for i, r in enumerate(fact.runs)
        for q in r.requests
    ]


def _per_run(requests: pd.DataFrame) -> pd.DataFrame:
    """Aggregate requests to one row per (fact, run); errored requests add no numbers."""
    ok = requests[requests["error"].isna()]
    itl = ok[[*KEYS, "itl_s"]].explode("itl_s").astype({"itl_s": "float64"})
    counts = requests.groupby(KEYS).agg(
        n_requests=("prompt_id", "size"),
        n_errors=("error", "count"),
        first_error=("error", "first"),
    )
    numbers = ok.groupby(KEYS).agg(
        decode_tps=("decode_tps", "median"),
        ttft_s=("ttft_s", "median"),
        output_tokens=("output_tokens", "sum"),
    )
    return counts.join(numbers).join(itl.groupby(KEYS)["itl_s"].median()).reset_index()


def build_frames(facts: dict[Path, Fact]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The run frame (one row per fact x run) and the request frame of parsed facts."""
    items = list(facts.items())
    meta = pd.DataFrame.from_records(
        [row for i, (p, f) in enumerate(items) for row in _run_rows(i, p, f)],
        columns=[c for c in RUN_COLUMNS if c not in DERIVED],
    )
    requests = pd.DataFrame.from_records(
        [row for i, (_, f) in enumerate(items) for row in _request_rows(i, f)],
        columns=REQUEST_COLUMNS,
    ).astype({"run_index": "Int64"})
    per_run = _per_run(requests)
    runs = meta.astype({"run_index": "Int64"}).merge(per_run, on=KEYS, how="left")
    has_run = runs["run_index"].notna()
    # A run counts only if every request came back: a silent error would skew the median.
    runs["run_ok"] = has_run & runs["n_requests"].gt(0) & runs["n_errors"].eq(0)
    runs["failed"] = ~runs["run_ok"] & (has_run | runs["status"].ne("skipped"))
    bad_run = has_run & ~runs["run_ok"]
    text = runs[["cause", "message", "first_error"]].astype("str")
    cause = text["cause"].mask(bad_run, "request_error")
    runs["cause"] = cause.mask(bad_run & runs["n_requests"].isna(), "no_requests")
    runs["message"] = text["message"].fillna(text["first_error"])
    runs = runs.drop(columns="first_error")
    runs = runs.astype(dict.fromkeys(INT_COLUMNS, "Int64"))
    return runs[RUN_COLUMNS], requests


def load_sweeps(paths: list[Path]) -> LoadResult:
    """Load every fact under the given sweep folders; unreadable files become problems."""
    facts: dict[Path, Fact] = {}
    problems: list[tuple[Path, str]] = []
    for root in paths:
        if not root.exists():
            problems.append((root, "no such file or directory"))
            continue
        for path in fact_paths(root):
            try:
                facts[path] = read_fact(path)
            except (OSError, ValueError) as exc:  # SchemaError is a ValueError
                problems.append((path, str(exc)))
    runs, requests = build_frames(facts)
    return LoadResult(facts=facts, runs=runs, requests=requests, problems=problems)
