"""Remember the rows already reduced from each sweep folder, so a re-report skips parsing.

Facts are written once, atomically, and never edited, so a file whose (size, mtime) is unchanged
reduces to the same rows. Parsing and validating dominates a large report (about 0.5 ms per fact
file on a 2-core machine), so `load_sweeps` keeps each folder's rows here and re-reads only new or
changed files. The key also hashes the code that produces rows: editing the reducer or the schema
invalidates every entry, nothing to bump by hand.

The store is a pickle under the user's own cache folder (mode 0700), never inside a results
folder: results are shared between people, and a pickle must only be read by whoever wrote it.
`SPECSWEEP_ANALYSIS_CACHE` names another folder, or `off` disables it.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

ENV = "SPECSWEEP_ANALYSIS_CACHE"
KEEP_DAYS = 30
_CODE = ("rows.py", "jsonl.py", "schema.py", "load.py", "cache.py")
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


def _file(where: Path, root: Path) -> Path:
    """The entry file of one sweep folder."""
    name = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:24]
    return where / f"{name}.pickle"


def read(where: Path | None, root: Path) -> Entry:
    """The folder's entry, or an empty one when absent, stale code, or unreadable."""
    if where is None:
        return Entry()
    try:
        with _file(where, root).open("rb") as fh:
            key, entry = pickle.load(fh)  # our own file, in a 0700 folder: see the module doc
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError):
        return Entry()
    if key != CODE_KEY or not isinstance(entry, Entry):
        return Entry()
    # A read counts as use: keeps the entry's age (for pruning) that of its last report.
    os.utime(_file(where, root))
    return entry


def write(where: Path | None, root: Path, entry: Entry) -> None:
    """Store the folder's entry atomically; a cache that cannot be written is simply not used."""
    if where is None:
        return
    target = _file(where, root)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        where.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tmp.open("wb") as fh:
            pickle.dump((CODE_KEY, entry), fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, target)
        _prune(where)
    except OSError:
        tmp.unlink(missing_ok=True)


def _prune(where: Path) -> None:
    """Forget folders not reported for KEEP_DAYS, so the cache does not grow with every sweep."""
    cutoff = time.time() - KEEP_DAYS * 86400
    for old in where.glob("*.pickle"):
        if old.stat().st_mtime < cutoff:
            old.unlink(missing_ok=True)
