"""Read sweep folders (fact JSON and SGLang benchmark JSONL) into typed, tidy pandas frames."""

from __future__ import annotations

import json
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis import cache
from analysis.jsonl import Labels, jsonl_rows
from analysis.rows import Row, request_rows, run_rows
from analysis.schema import Fact, load_fact

RUN_COLUMNS = [
    "path", "source", "sweep_id", "host", "engine", "engine_version", "model", "config_id",
    "speculative", "algorithm", "steps", "topk", "draft_tokens", "env_profile", "status",
    "started_at", "concurrency", "repeat", "duration_s", "n_requests", "n_errors", "run_ok",
    "failed", "cause", "message", "decode_tps", "ttft_s", "ttft_p99_s", "itl_s", "itl_p99_s",
    "output_tokens", "accept_length", "accept_rate", "drafted", "accepted", "verify_steps",
    "step_time_ms", "fact_id", "run_index",
]  # fmt: skip
REQUEST_COLUMNS = [
    "path", "fact_id", "run_index", "sweep_id", "host", "engine", "model", "config_id",
    "concurrency", "repeat", "prompt_id", "output_tokens", "ttft_s", "e2e_s", "decode_tps",
    "text", "error",
]  # fmt: skip
INT_COLUMNS = [
    "steps", "topk", "draft_tokens", "concurrency", "repeat", "drafted", "accepted",
    "verify_steps", "n_requests", "n_errors", "output_tokens", "run_index",
]  # fmt: skip
FLOAT_COLUMNS = [
    "started_at", "duration_s", "decode_tps", "ttft_s", "ttft_p99_s", "itl_s", "itl_p99_s",
    "accept_length", "accept_rate", "step_time_ms", "e2e_s",
]  # fmt: skip
# Few distinct values over many rows: categories keep the frames (and the cache) small.
CATEGORIES = ["path", "sweep_id", "host", "engine", "model", "config_id", "prompt_id", "source"]
PARALLEL_MIN = 400  # files to parse before worker processes pay for themselves
Problems = list[tuple[str, str]]


@dataclass
class LoadResult:
    """Runs and requests as frames, the files they came from, and those that could not be read."""

    files: list[Path]
    runs: pd.DataFrame
    requests: pd.DataFrame
    problems: list[tuple[Path, str]] = field(default_factory=list)


def fact_paths(root: Path) -> list[Path]:
    """Fact and JSONL files of one sweep folder (`<host>/<name>.json[l]`); a file names itself."""
    if root.is_file():
        return [root]
    # Only host subfolders hold results; plan.json / sweep.json sit at the sweep root.
    return sorted(p for pattern in ("*/*.json", "*/*.jsonl") for p in root.glob(pattern) if p.is_file())


def read_fact(path: Path) -> Fact:
    """Parse one fact file; raises ValueError or OSError with a readable reason."""
    try:
        data = json.loads(path.read_bytes())
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text: {exc.reason}") from exc
    return load_fact(data)


def frame(rows: list[Row], columns: list[str]) -> pd.DataFrame:
    """Rows as a frame with the given columns and their dtypes (empty input included)."""
    df = pd.DataFrame.from_records(rows, columns=columns)
    dtypes = {c: "Int64" for c in INT_COLUMNS if c in columns}
    dtypes |= {c: "float64" for c in FLOAT_COLUMNS if c in columns}
    dtypes |= {c: "category" for c in CATEGORIES if c in columns and c != "path"}
    dtypes |= {c: "bool" for c in ("run_ok", "failed", "speculative") if c in columns}
    return df.astype(dtypes)


def parse(items: list[tuple[Path, str]], labels: Labels) -> tuple[pd.DataFrame, pd.DataFrame, Problems]:
    """Rows of the given (file, name) pairs; the name is what rows and problems call the file."""
    runs: list[Row] = []
    requests: list[Row] = []
    problems: Problems = []
    for path, name in items:
        try:
            if path.suffix == ".jsonl":
                rows, bad = jsonl_rows(path, labels, name)
                runs += rows
                problems += bad
                continue
            fact = read_fact(path)
        except (OSError, ValueError) as exc:  # SchemaError is a ValueError
            problems.append((name, str(exc)))
            continue
        runs += run_rows(name, fact)
        requests += request_rows(name, fact)
    return frame(runs, RUN_COLUMNS), frame(requests, REQUEST_COLUMNS), problems


def parse_many(items: list[tuple[Path, str]], labels: Labels) -> tuple[pd.DataFrame, pd.DataFrame, Problems]:
    """`parse`, spread over worker processes when there are enough files to be worth it."""
    workers = min(os.cpu_count() or 1, 8)
    if len(items) < PARALLEL_MIN or workers < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return parse(items, labels)
    chunks = [items[i::workers] for i in range(workers)]
    # fork: the workers start with this process's imports instead of paying for them again.
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        parts = list(pool.map(parse, chunks, [labels] * workers))
    runs = pd.concat([p[0] for p in parts], ignore_index=True)
    requests = pd.concat([p[1] for p in parts], ignore_index=True)
    return runs, requests, [x for p in parts for x in p[2]]


def _load_folder(root: Path, labels: Labels, where: Path | None) -> cache.Entry:
    """A sweep folder's rows (path = file name within the folder), reusing the cached ones."""
    if root.is_file():  # one file named on the command line: nothing worth caching
        runs, requests, problems = parse([(root, root.name)], labels)
        return cache.Entry(runs=runs, requests=requests, problems={root.name: problems})
    paths = fact_paths(root)
    names = {p: p.relative_to(root).as_posix() for p in paths}
    stamps = {names[p]: cache.stamp(p) for p in paths}
    old = cache.read(where, root)
    fresh = {n for n, s in stamps.items() if old.stamps.get(n) == s}
    stale = [(p, names[p]) for p in paths if names[p] not in fresh]
    if not stale and set(old.stamps) == fresh and old.runs is not None:
        return old
    runs, requests, problems = parse_many(stale, labels)
    if old.runs is not None and old.requests is not None and fresh:
        keep = old.runs["path"].isin(fresh)
        runs = pd.concat([old.runs[keep], runs], ignore_index=True)
        requests = pd.concat([old.requests[old.requests["path"].isin(fresh)], requests], ignore_index=True)
    by_file: dict[str, Problems] = {n: v for n, v in old.problems.items() if n in fresh}
    for at, reason in problems:
        by_file.setdefault(at.split(":", 1)[0], []).append((at, reason))
    entry = cache.Entry(stamps=stamps, runs=runs, requests=requests, problems=by_file)
    cache.write(where, root, entry)
    return entry


def load_sweeps(paths: list[Path], labels: Labels = Labels(), cache_dir: Path | None = None) -> LoadResult:
    """Load every fact and JSONL file under the given folders; unreadable ones become problems."""
    # JSONL overrides change what a file means: such a load neither uses nor fills the cache.
    where = cache.folder(cache_dir) if labels == Labels() else None
    runs: list[pd.DataFrame] = []
    requests: list[pd.DataFrame] = []
    problems: list[tuple[Path, str]] = []
    for root in paths:
        if not root.exists():
            problems.append((root, "no such file or directory"))
            continue
        entry = _load_folder(root, labels, where)
        assert entry.runs is not None and entry.requests is not None
        prefix = f"{root.parent if root.is_file() else root}{os.sep}"
        for at, reason in (x for bad in entry.problems.values() for x in bad):
            problems.append((Path(prefix + at), reason))
        runs.append(entry.runs.assign(path=prefix + entry.runs["path"].astype(str)))
        requests.append(entry.requests.assign(path=prefix + entry.requests["path"].astype(str)))
    run = pd.concat(runs, ignore_index=True) if runs else frame([], RUN_COLUMNS)
    req = pd.concat(requests, ignore_index=True) if requests else frame([], REQUEST_COLUMNS)
    # Categories from different folders do not line up: rebuild them over the whole load.
    run = run.astype({c: "category" for c in CATEGORIES if c != "path"})
    req = req.astype({c: "category" for c in CATEGORIES if c in req.columns and c != "path"})
    codes, files = pd.factorize(run["path"])
    run["fact_id"] = codes
    req["fact_id"] = req["path"].map(dict(zip(files, range(len(files)), strict=True))).astype("Int64")
    return LoadResult(files=[Path(f) for f in files], runs=run[RUN_COLUMNS], requests=req, problems=problems)
