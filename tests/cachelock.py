"""A lock per shared .cache entry: test workers (pytest -n) run side by side on one machine."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CACHE = Path(__file__).resolve().parents[1] / ".cache"


@contextmanager
def cache_lock(name: str) -> Iterator[None]:
    """Hold .cache/.<name>.lock: one worker fills a cache entry, the others wait, then reuse it."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
