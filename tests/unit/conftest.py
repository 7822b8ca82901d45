"""Unit-test fixtures: keep the analysis cache of every test in its own temporary folder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The benchmark client's scripts import each other as they sit side by side on a host.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles" / "benchmark" / "files"))


@pytest.fixture(autouse=True)
def analysis_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh SPECSWEEP_ANALYSIS_CACHE per test (inherited by `python -m analysis` subprocesses)."""
    folder = tmp_path / "analysis-cache"
    monkeypatch.setenv("SPECSWEEP_ANALYSIS_CACHE", str(folder))
    return folder
