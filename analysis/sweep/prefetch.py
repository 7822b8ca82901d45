"""Which checkpoint a host's next launch reads, for -e prefetch (plugins/modules/specsweep_prefetch.py).

Every launch of a host's sweep serves the same model (and, for SGLang, the same draft model); the
configs differ in flags only. So the next launch's checkpoint is the current one's: read ahead
during each benchmark it costs nothing where the page cache still holds it from this launch's
load, and saves the storage reads where the cache lost it between launches (memory taken by the
server or by other work, a checkpoint near the host's RAM).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from analysis.engines import ENGINES


def paths(engine: str, settings: Mapping[str, Any], wanted: bool) -> list[str]:
    """The checkpoint files or folders a launch on this host reads; [] when prefetch is off."""
    if not wanted:
        return []
    return [str(settings[k]) for k in ENGINES[engine].checkpoints if settings.get(k)]
