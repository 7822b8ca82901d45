"""The nightly's settings as filters (analysis.nightly.request owns them and their defaults; the
sweep's SLO options are analysis.sweep.request's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# The suite's own Python (installed in the venv by scripts/setup.sh).
from analysis.deploy.store import deployed_configs
from analysis.nightly.request import regress_options, settings, sweep_request
from analysis.sweep.request import sla_options


class FilterModule:
    """Ansible entry point: {{ specsweep_nightly | specsweep_nightly_request(mode, plan_only, deployed) }},
    deployed = {{ history_path | specsweep_deployed_configs }}."""

    def filters(self) -> dict[str, Any]:
        return {
            "specsweep_nightly_request": sweep_request,
            "specsweep_deployed_configs": lambda path: deployed_configs(Path(path)),
            "specsweep_nightly_settings": settings,
            "specsweep_regress_options": regress_options,
            "specsweep_sla_options": sla_options,
        }
