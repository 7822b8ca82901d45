"""Forked processes: how the analysis uses more than one core.

fork, not spawn: a forked process starts with its parent's imports (pandas, matplotlib: most of
a second each) and data instead of paying for them again. Where fork does not exist, callers do
the work in their own process.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
from collections.abc import Iterator
from multiprocessing.context import ForkContext


def available() -> bool:
    """Whether this platform can fork."""
    return "fork" in multiprocessing.get_all_start_methods()


def context() -> ForkContext:
    """The fork start method, for pools and processes."""
    return multiprocessing.get_context("fork")


@contextlib.contextmanager
def frozen_gc() -> Iterator[None]:
    """Fork inside this: the objects made so far are out of the collector's sight meanwhile.

    A child's first full collection would otherwise walk every object it inherited, writing to
    each one, and so copy most of its parent's memory page by page: 0.15 s per plot worker of a
    50-host report, as long as a figure takes. See gc.freeze in the Python documentation.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
