"""Hosts in the order people count them: gpu-node-2 before gpu-node-10, in tables and plots."""

from __future__ import annotations

import re
from collections.abc import Iterable

import pandas as pd

_DIGITS = re.compile(r"(\d+)")


def natural_key(name: object) -> tuple[tuple[str | int, ...], str]:
    """Sort key: digit runs compare as numbers, then the name itself breaks ties (node-01, node-1).

    re.split with a group alternates text and digits, so two keys compare text with text and
    number with number, never one with the other.
    """
    text = str(name)
    parts = _DIGITS.split(text)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), text


def natural(names: Iterable[str]) -> list[str]:
    """The names in natural order."""
    return sorted(names, key=natural_key)


def sort_key(column: pd.Series) -> pd.Series:
    """A `sort_values(key=...)` function: hosts by natural order, any other column as it is."""
    if column.name != "host":
        return column
    names = column.astype(object)  # a category column would map to categories in their old order
    rank = {h: i for i, h in enumerate(natural(names.dropna().unique()))}
    return names.map(rank)
