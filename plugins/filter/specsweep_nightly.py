"""The nightly's settings and commands as filters (analysis.nightly.request owns them and their
defaults)."""

from __future__ import annotations

from typing import Any

# The suite's own Python (installed in the venv by scripts/setup.sh).
from analysis.nightly.request import commands, sweep_request


class FilterModule:
    """Ansible entry point: {{ specsweep_nightly | specsweep_nightly_request(mode, plan_only) }}."""

    def filters(self) -> dict[str, Any]:
        return {"specsweep_nightly_request": sweep_request, "specsweep_nightly_commands": commands}
