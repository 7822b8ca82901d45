"""Claims: which host measures a shared config in this run (shard mode, step-search probes).

A claim is a folder under results/<sweep_id>/.claims/<run_id>/ (mkdir is atomic, so exactly one
host wins) holding a note that names its host. The claim of a host that has left the run
(unreachable or failed) is taken over by the next host that asks, so its config is measured in
the same run, not only on resume.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from analysis.files import write_json_atomic

NOTE = "claim.json"


def note(folder: Path) -> dict[str, Any] | None:
    """A claim's note; None while it is being written (a claim's note lags its mkdir) or gone."""
    try:
        found = json.loads((folder / NOTE).read_bytes())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def owner(folder: Path) -> str | None:
    """The host holding a claim, None when unknown."""
    return (note(folder) or {}).get("host")


def take(folder: Path, about: Mapping[str, Any], lost: Collection[str] = ()) -> bool:
    """Claim `folder` for the host `about["host"]`, over the claim of a host in `lost`; True when
    it is that host's to measure (it claimed it now, or earlier in this run)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(2):  # the second try follows taking over a lost host's claim
        try:
            os.mkdir(folder)
        except FileExistsError:
            holder = owner(folder)
            if holder == about["host"]:
                return True
            if holder is None or holder not in lost:
                return False
            # Kept beside, not deleted; FileNotFoundError: another host took it over first (mkdir decides).
            with contextlib.suppress(FileNotFoundError):
                os.rename(folder, folder.with_name(f".{folder.name}.lost-{holder}-{time.time_ns()}"))
            continue
        write_json_atomic(folder / NOTE, {**about, "claimed_at": time.time()})
        return True
    return False
