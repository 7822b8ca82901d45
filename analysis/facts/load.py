"""Read sweep folders (fact JSON and SGLang benchmark JSONL) into typed, tidy pandas frames."""

from __future__ import annotations

import gc
import os
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis import cache, forks, metrics
from analysis.facts.jsonl import Labels, jsonl_rows
from analysis.facts.rows import Row, request_columns, run_rows
from analysis.facts.schema import Fact, decode_fact
from analysis.sweep.config import COLUMN_TYPES, COLUMNS

# A run row: where it came from, its config's columns (analysis.sweep.config), what it measured
# (the metric table's run figures, analysis.metrics).
RUN_COLUMNS = [
    "path", "source", "sweep_id", "host", "engine", "engine_version", "model", "config_id",
    *COLUMNS, "status", "started_at", "concurrency", "repeat", "duration_s", "n_requests",
    "n_errors", "run_ok", "failed", "cause", "message", *(m.name for m in metrics.ROWS),
    "fact_id", "run_index", "launch_index", "workload", "interfered", "accepted_histogram",
    "launch_prior_cv_pct", "launch_prior_df",
]  # fmt: skip
REQUEST_COLUMNS = [
    "path", "fact_id", "run_index", "sweep_id", "host", "engine", "model", "config_id",
    "concurrency", "repeat", "prompt_id", "output_tokens", "ttft_s", "e2e_s", "decode_tps",
    "text", "error", "workload",
]  # fmt: skip
INT_COLUMNS = [
    *(c for c in COLUMNS if COLUMN_TYPES[c] is int), "concurrency", "repeat", "n_requests", "n_errors",
    "run_index", "launch_index", *(m.name for m in metrics.ROWS if m.integer),
]  # fmt: skip
FLOAT_COLUMNS = [
    "started_at",
    "duration_s",
    "launch_prior_cv_pct",
    "launch_prior_df",
    *(m.name for m in metrics.ROWS if not m.integer),
]
BOOL_COLUMNS = [*(c for c in COLUMNS if COLUMN_TYPES[c] is bool), "run_ok", "failed", "interfered"]
# Few distinct values over many rows: categories keep the frames (and the cache) small.
# Greedy outputs repeat across configs, so texts are categories too (and compare as codes).
CATEGORIES = [
    "path", "sweep_id", "host", "engine", "model", "config_id", "prompt_id", "source", "text", "workload",
]  # fmt: skip
PARALLEL_MIN = 400  # files to parse before worker processes pay for themselves
Problems = list[tuple[str, str]]


@dataclass
class LoadResult:
    """Runs and requests as frames, the files they came from, and those that could not be read."""

    runs: pd.DataFrame
    requests: pd.DataFrame
    problems: list[tuple[Path, str]] = field(default_factory=list)

    @property
    def files(self) -> list[Path]:
        """The files that gave rows, in fact_id order."""
        return [Path(p) for p in self.runs.drop_duplicates("fact_id").sort_values("fact_id")["path"]]


def fact_files(root: Path) -> dict[str, cache.Stamp]:
    """Fact and JSONL files of a sweep folder (`<host>/<name>.json[l]`) by name, with their stamps."""
    found = {}
    # Only host subfolders hold results; plan.json / sweep.json sit at the sweep root. os.scandir:
    # a 10,000-file sweep is listed and stat'ed without building a Path per file.
    with os.scandir(root) as hosts:
        for host in (h for h in hosts if h.is_dir()):
            with os.scandir(host.path) as files:
                for f in files:
                    if f.name.endswith((".json", ".jsonl")) and f.is_file():
                        st = f.stat()
                        found[f"{host.name}/{f.name}"] = (st.st_size, st.st_mtime_ns)
    return {name: found[name] for name in sorted(found)}  # names alone sort twice as fast as pairs


def read_fact(path: Path) -> Fact:
    """Parse one fact file; raises ValueError or OSError with a readable reason."""
    return decode_fact(path.read_bytes())


def typed(df: pd.DataFrame) -> pd.DataFrame:
    """A run or request frame with its columns' dtypes (categories rebuilt over its rows)."""
    dtypes = {c: "Int64" for c in INT_COLUMNS if c in df.columns}
    dtypes |= {c: "float64" for c in FLOAT_COLUMNS if c in df.columns}
    dtypes |= {c: "category" for c in CATEGORIES if c in df.columns}
    dtypes |= {c: "bool" for c in BOOL_COLUMNS if c in df.columns}
    return df.astype(dtypes)


def concat(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Typed frames of the same columns as one, still typed.

    Each category column is given the union of the parts' categories first: concatenating
    categories that differ gives plain objects, and categorising 100,000 texts again cost more
    than the rest of a re-report that found a few new files.
    """
    columns = [c for c in CATEGORIES if c in parts[0].columns]
    for column in columns:
        union = parts[0][column].cat.categories
        for part in parts[1:]:
            union = union.append(part[column].cat.categories.difference(union))
        parts = [p.assign(**{column: p[column].cat.set_categories(union)}) for p in parts]
    out = pd.concat(parts, ignore_index=True)
    # Only values present, as a frame built from rows has (the rows of replaced files are gone).
    return out.assign(**{c: out[c].cat.remove_unused_categories() for c in columns})


def frame(data: list[Row] | dict[str, list[Any]], columns: list[str]) -> pd.DataFrame:
    """Rows, or lists by column, as a typed frame with the given columns (empty input included)."""
    return typed(pd.DataFrame(data, columns=columns))


def parse(items: list[tuple[Path, str]], labels: Labels) -> tuple[pd.DataFrame, pd.DataFrame, Problems]:
    """Rows of the given (file, name) pairs; the name is what rows and problems call the file."""
    runs: list[Row] = []
    requests: defaultdict[str, list[Any]] = defaultdict(list)
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
        for column, values in request_columns(name, fact).items():
            requests[column] += values
    return frame(runs, RUN_COLUMNS), frame(requests, REQUEST_COLUMNS), problems


def workers() -> int:
    """Processes a large cold load parses on: one per core, at most 8."""
    return min(os.cpu_count() or 1, 8)


def parse_many(items: list[tuple[Path, str]], labels: Labels) -> tuple[pd.DataFrame, pd.DataFrame, Problems]:
    """`parse`, spread over worker processes when there are enough files to be worth it."""
    n = workers()
    if len(items) < PARALLEL_MIN or n < 2 or not forks.available():
        return parse(items, labels)
    chunks = [items[i::n] for i in range(n)]
    # No collector in a worker: it only makes acyclic rows and then exits, and its collections
    # would walk ever more of them (a tenth of its time) to free nothing.
    with ProcessPoolExecutor(n, mp_context=forks.context(), initializer=gc.disable) as pool:
        with forks.frozen_gc():  # the workers are forked at the first submit
            pending = [pool.submit(parse, chunk, labels) for chunk in chunks]
        parts = [p.result() for p in pending]
    runs = concat([p[0] for p in parts])
    requests = concat([p[1] for p in parts])
    return runs, requests, [x for p in parts for x in p[2]]


def _load_folder(root: Path, labels: Labels, where: Path | None) -> cache.Entry:
    """A sweep folder's rows (path = file name within the folder), reusing the cached ones."""
    if root.is_file():  # one file named on the command line: nothing worth caching
        runs, requests, problems = parse([(root, root.name)], labels)
        return cache.Entry(runs=runs, requests=requests, problems={root.name: problems})
    stamps = fact_files(root)
    old = cache.read(where, root)
    fresh = {n for n, s in stamps.items() if old.stamps.get(n) == s}
    stale = [(root / n, n) for n in stamps if n not in fresh]
    if not stale and set(old.stamps) == fresh and old.runs is not None:
        return old
    runs, requests, problems = parse_many(stale, labels)
    if old.runs is not None and old.requests is not None and fresh:
        keep = old.runs["path"].isin(fresh)
        runs = concat([old.runs[keep], runs])
        requests = concat([old.requests[old.requests["path"].isin(fresh)], requests])
    by_file: dict[str, Problems] = {n: v for n, v in old.problems.items() if n in fresh}
    for at, reason in problems:
        by_file.setdefault(at.split(":", 1)[0], []).append((at, reason))
    entry = cache.Entry(stamps=stamps, runs=runs, requests=requests, problems=by_file)
    cache.write(where, root, entry)
    return entry


NO_LABELS = Labels()


def load_sweeps(
    paths: list[Path], labels: Labels = NO_LABELS, cache_dir: Path | None = None, use_cache: bool = True
) -> LoadResult:
    """Load every fact and JSONL file under the given folders; unreadable ones become problems."""
    # JSONL overrides change what a file means: such a load neither uses nor fills the cache.
    where = cache.folder(cache_dir) if use_cache and labels == NO_LABELS else None
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
        runs.append(_prefixed(entry.runs, prefix))
        requests.append(_prefixed(entry.requests, prefix))
    run = _combine(runs, RUN_COLUMNS)
    req = _combine(requests, REQUEST_COLUMNS)
    codes, files = pd.factorize(run["path"].astype(str))
    run["fact_id"] = codes
    # A request's fact is its file: map each distinct path once, then every row by its code.
    ids = dict(zip(files.tolist(), range(len(files)), strict=True))
    paths = req["path"].cat.categories.tolist()
    per_path = np.array([ids.get(str(p), -1) for p in paths] + [-1], dtype="int64")
    req["fact_id"] = per_path[req["path"].cat.codes.to_numpy()]
    return LoadResult(runs=run[RUN_COLUMNS], requests=req, problems=problems)


def _prefixed(df: pd.DataFrame, prefix: str) -> pd.DataFrame:
    """The frame with `prefix` before each path (a category: each distinct path once, not each row)."""
    names = df["path"].cat.categories.tolist()
    return df.assign(path=df["path"].cat.rename_categories([prefix + n for n in names]))


def _combine(parts: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    """Frames of several folders as one, with categories over all of them."""
    if not parts:
        return frame([], columns)
    return parts[0] if len(parts) == 1 else concat(parts)
