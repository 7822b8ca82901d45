"""SGLang 0.5.23's own source, from its PyPI wheel (downloaded once, never installed or imported).

The tests read its argument parsers and benchmark code to check what we pass it.
"""

from __future__ import annotations

import ast
import bisect
import json
import logging
import math
import subprocess
import sys
import zipfile
from functools import cached_property
from pathlib import Path
from typing import Any

from cachelock import cache_lock

CACHE = Path(__file__).resolve().parents[1] / ".cache" / "sglang-0.5.23"


def sglang_source(*parts: str) -> Path:
    """The unpacked `sglang` package with at least `parts` (paths or folder prefixes in the wheel,
    e.g. "sglang/srt/") present; returns the package folder."""
    # A marker per part: a folder can exist with only the part of it an earlier caller asked for.
    done = {p: CACHE / "extracted" / p.strip("/").replace("/", "%") for p in parts}
    with cache_lock("sglang-0.5.23"):
        _extract([p for p, marker in done.items() if not marker.exists()], done)
    return CACHE / "sglang"


def _extract(missing: list[str], done: dict[str, Path]) -> None:
    """Unpack the `missing` parts from the wheel (downloaded first if absent), marking each done."""
    if not missing:
        return
    wheels = CACHE / "wheel"
    if not list(wheels.glob("sglang-0.5.23-*.whl")):
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
             "--dest", str(wheels), "sglang==0.5.23"],
            check=True,
        )  # fmt: skip
    with zipfile.ZipFile(next(wheels.glob("sglang-0.5.23-*.whl"))) as whl:
        whl.extractall(CACHE, [n for n in whl.namelist() if n.startswith(tuple(missing))])
    for p in missing:
        done[p].parent.mkdir(exist_ok=True)
        done[p].touch()


# What the loader and the classes that use it need from the rest of sglang (the module imports
# server args and runtime context, which pull in torch): the names below are stubbed, the code is
# SGLang's own, taken from the wheel's source by name.
TAKEN = ("DEFAULT_ADAPTIVE_CONFIG", "_load_adaptive_config", "AdaptiveStepSlot", "AdaptiveSpeculativeParams")


def sglang_adaptive() -> dict[str, Any]:
    """_load_adaptive_config and the classes that route a batch with it, from the 0.5.23 source."""
    path = sglang_source("sglang/srt/speculative/") / "srt" / "speculative" / "adaptive_spec_params.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    kept = []
    for node in tree.body:
        names = [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        if getattr(node, "name", None) in TAKEN or set(names) & set(TAKEN):
            kept.append(node)
    assert len(kept) == len(TAKEN), f"0.5.23's adaptive_spec_params.py changed: found {len(kept)} of {TAKEN}"
    namespace: dict[str, Any] = {
        "json": json, "math": math, "bisect": bisect, "cached_property": cached_property,
        "logger": logging.getLogger("sglang-adaptive-test"), "log_info_on_rank0": lambda *_: None,
        "__name__": "sglang_adaptive_spec_params",
    }  # fmt: skip
    exec(compile(ast.Module(kept, type_ignores=[]), str(path), "exec"), namespace)  # SGLang's own code
    return namespace
