"""Writing the JSON documents a sweep keeps on disk (facts, plans, claims, search state).

Below analysis.sweep and analysis.facts, so both write the same way without importing each other.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON through a temp file and rename: a reader never sees half a document, and a write
    that fails (a full disk) leaves no temp file behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
