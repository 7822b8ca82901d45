"""Remember the rows already reduced from each sweep folder, so a re-report skips parsing, and
the plots already drawn, so a re-report of unchanged results draws nothing.

Facts are written once, atomically, and never edited, so a file whose (size, mtime) is unchanged
reduces to the same rows. Parsing and validating dominates a large report (about 0.5 ms per fact
file on a 2-core machine), so `load_sweeps` keeps each folder's rows here and re-reads only new or
changed files. The key also hashes the code that produces rows: editing the reducer or the schema
invalidates every entry, nothing to bump by hand.

A plot is a pure function of the step-table rows it draws and of the plotting code: it is kept
under a key that hashes both (the rows through `content_digest`), so a changed row or new code is
simply another key.
Drawing is most of a warm report's CPU time (laying out text: half a second for a 50-host plot).
The HTML report's templates are kept compiled too (`subfolder(..., TEMPLATES)`: jinja2's own cache,
which checks each against its source).

The store is pickles under the user's own cache folder (mode 0700), never inside a results
folder: results are shared between people, and a pickle must only be read by whoever wrote it.
`SPECSWEEP_ANALYSIS_CACHE` names another folder, or `off` disables it. Entries not used for
KEEP_DAYS are pruned.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

ENV = "SPECSWEEP_ANALYSIS_CACHE"
KEEP_DAYS = 30
PLOTS = "plots"  # the subfolder of drawn plots
TEMPLATES = "templates"  # the subfolder of compiled HTML templates (jinja2's, analysis.report.html)
# The config module too: its fields are the rows' config columns; and the metric table: its
# figures are the rows' other columns.
_CODE = (
    "facts/rows.py", "facts/jsonl.py", "facts/schema.py", "facts/load.py", "sweep/config.py", "metrics.py",
    "cache.py",
)  # fmt: skip
Stamp = tuple[int, int]


def _code_key() -> str:
    """Digest of the modules that decide what a cached row contains, and of pandas' version."""
    digest = hashlib.sha256(pd.__version__.encode())
    for name in _CODE:
        digest.update((Path(__file__).parent / name).read_bytes())
    return digest.hexdigest()


CODE_KEY = _code_key()


@dataclass
class Entry:
    """One sweep folder's reduced rows, with the stamp of every file they came from."""

    stamps: dict[str, Stamp] = field(default_factory=dict)
    runs: pd.DataFrame | None = None
    requests: pd.DataFrame | None = None
    problems: dict[str, list[tuple[str, str]]] = field(default_factory=dict)


def folder(explicit: Path | None = None) -> Path | None:
    """Where entries live: an explicit folder, $SPECSWEEP_ANALYSIS_CACHE, or ~/.cache; None = off."""
    if explicit is not None:
        return explicit
    value = os.environ.get(ENV)
    if value is not None:
        return None if value.strip().lower() in ("", "off", "0", "false", "no") else Path(value)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "specsweep" / "analysis"


def subfolder(where: Path | None, name: str) -> Path | None:
    """A subfolder of the cache for another kind of entry, made (mode 0700) if need be; None when
    the cache is off or cannot be written."""
    if where is None:
        return None
    try:
        where.mkdir(parents=True, exist_ok=True, mode=0o700)
        (where / name).mkdir(exist_ok=True, mode=0o700)
    except OSError:
        return None
    return where / name


def _file(where: Path, root: Path) -> Path:
    """The entry file of one sweep folder."""
    name = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:24]
    return where / f"{name}.pickle"


def _load(path: Path, key: str) -> tuple[bool, Any]:
    """(True, value) stored at `path` under `key`; (False, None) when absent, stale or unreadable."""
    try:
        with path.open("rb") as fh:
            stored, value = pickle.load(fh)  # our own file, in a 0700 folder: see the module doc
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError):
        return False, None
    if stored != key:
        return False, None
    # A read counts as use: keeps the entry's age (for pruning) that of its last report.
    with contextlib.suppress(OSError):  # a cache folder someone made read-only still reads
        os.utime(path)
    return True, value


def _store(where: Path, path: Path, key: str, value: Any) -> None:
    """Write (key, value) to `path` atomically; a cache that cannot be written is simply not used."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        where.mkdir(parents=True, exist_ok=True, mode=0o700)  # the folder others must not read
        path.parent.mkdir(exist_ok=True, mode=0o700)
        with tmp.open("wb") as fh:
            pickle.dump((key, value), fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        _prune(where)
    except OSError:
        tmp.unlink(missing_ok=True)


def read(where: Path | None, root: Path) -> Entry:
    """The folder's entry, or an empty one when absent, stale code, or unreadable."""
    if where is None:
        return Entry()
    found, entry = _load(_file(where, root), CODE_KEY)
    return entry if found and isinstance(entry, Entry) else Entry()


def write(where: Path | None, root: Path, entry: Entry) -> None:
    """Store the folder's entry."""
    if where is not None:
        _store(where, _file(where, root), CODE_KEY, entry)


def content_digest(*frames: pd.DataFrame) -> bytes:
    """A digest of the frames' contents, for keying what was drawn from them.

    pandas' own row hashes, with the columns and their dtypes, not the frames' pickles: two
    pickles of equal frames differ with how their objects happen to be shared. Raises TypeError
    for values pandas cannot hash (lists, dicts).
    """
    digest = hashlib.sha256()
    for frame in frames:
        digest.update(repr([(str(c), str(t)) for c, t in frame.dtypes.items()]).encode())
        digest.update(pd.util.hash_pandas_object(frame, index=True).to_numpy().tobytes())
    return digest.digest()


def read_plot(where: Path | None, key: str) -> tuple[bool, Any]:
    """(True, what the plotting function returned) for a key drawn before, else (False, None)."""
    return (False, None) if where is None else _load(where / PLOTS / f"{key[:32]}.pickle", key)


def write_plot(where: Path | None, key: str, value: Any) -> None:
    """Remember what a plotting function returned for this key."""
    if where is not None:
        _store(where, where / PLOTS / f"{key[:32]}.pickle", key, value)


def _prune(where: Path) -> None:
    """Forget entries unused for KEEP_DAYS, so the cache does not grow with every sweep."""
    cutoff = time.time() - KEEP_DAYS * 86400
    for old in [*where.glob("*.pickle"), *(where / PLOTS).glob("*.pickle"), *(where / TEMPLATES).glob("*")]:
        if old.stat().st_mtime < cutoff:
            old.unlink(missing_ok=True)
