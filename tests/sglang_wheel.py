"""SGLang 0.5.23's own source, from its PyPI wheel (downloaded once, never installed or imported).

The tests read its argument parsers and benchmark code to check what we pass it.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

CACHE = Path(__file__).resolve().parents[2] / ".cache" / "sglang-0.5.23"


def sglang_source(*parts: str) -> Path:
    """The unpacked `sglang` package with at least `parts` (paths or folder prefixes in the wheel,
    e.g. "sglang/srt/") present; returns the package folder."""
    missing = [p for p in parts if not (CACHE / p).exists()]
    if missing:
        wheels = CACHE / "wheel"
        if not list(wheels.glob("sglang-0.5.23-*.whl")):
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                 "--dest", str(wheels), "sglang==0.5.23"],
                check=True,
            )  # fmt: skip
        with zipfile.ZipFile(next(wheels.glob("sglang-0.5.23-*.whl"))) as whl:
            whl.extractall(CACHE, [n for n in whl.namelist() if n.startswith(tuple(missing))])
    return CACHE / "sglang"
