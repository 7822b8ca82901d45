"""No two test files share a basename: pytest imports them as one module (rootdir-relative names
without packages), and the second is not collected but errors ('import file mismatch')."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_file_has_a_basename_of_its_own() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert [n for n, count in names.items() if count > 1] == []
