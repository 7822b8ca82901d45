"""A drawn plot as the report writes it: file name, caption and PNG bytes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Plot:
    """One rendered figure: file name, caption and PNG bytes.

    A module of its own, free of matplotlib: unpickling a Plot imports this module, and the
    report's process must not import matplotlib only to receive bytes from the plot helper.
    """

    name: str
    caption: str
    png: bytes
