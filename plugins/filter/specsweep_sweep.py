"""The sweep's per-launch rules as filters: `{{ specsweep_after | specsweep_stop_now }}`."""

from __future__ import annotations

from typing import Any

# The suite's own Python (installed in the venv by scripts/setup.sh).
from analysis.sweep.outcome import stop_now


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {"specsweep_stop_now": stop_now}
