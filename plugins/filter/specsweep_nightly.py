"""The nightly's settings and commands as filters (analysis.nightly.request owns them and their
defaults)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# The suite's own Python (installed in the venv by scripts/setup.sh).
from analysis.deploy.deployed import deployed_configs
from analysis.nightly.request import commands, history_path, sweep_request


def deployed(history: str | None, results_dir: str | None, playbook_dir: str) -> dict[str, str]:
    """Per host, the config deployed there, from the store the night is added to."""
    return deployed_configs(Path(history_path(history, results_dir, os.path.dirname(playbook_dir))))


class FilterModule:
    """Ansible entry point: {{ specsweep_nightly | specsweep_nightly_request(mode, plan_only, deployed) }},
    deployed = {{ nightly_history | specsweep_deployed_configs(results_dir, playbook_dir) }}."""

    def filters(self) -> dict[str, Any]:
        return {
            "specsweep_nightly_request": sweep_request,
            "specsweep_nightly_commands": commands,
            "specsweep_deployed_configs": deployed,
        }
