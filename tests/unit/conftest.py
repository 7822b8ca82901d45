"""Unit-test fixtures: keep the analysis cache of every test in its own temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def analysis_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh SPECSWEEP_ANALYSIS_CACHE per test (inherited by `python -m analysis` subprocesses)."""
    folder = tmp_path / "analysis-cache"
    monkeypatch.setenv("SPECSWEEP_ANALYSIS_CACHE", str(folder))
    return folder
