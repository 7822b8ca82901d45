"""The nightly's settings and commands as filters (analysis.nightly.request owns them and their
defaults)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# The suite's own Python (installed in the venv by scripts/setup.sh).
from analysis.deploy.deployed import deployed_configs
from analysis.nightly.request import commands, history_path, sweep_request


def request(asked: Mapping[str, Any]) -> dict[str, Any]:
    """The night's sweep request from what -e says (`overrides`, `mode`, `plan_only`), with the
    config deployed on each host, read from the store the night is added to (`history`,
    `results_dir`, `playbook_dir`). Here, not in analysis.nightly, which sits below analysis.deploy."""
    store = history_path(asked["history"], asked["results_dir"], os.path.dirname(asked["playbook_dir"]))
    deployed = deployed_configs(Path(store))
    return sweep_request(asked["overrides"], asked["mode"], asked["plan_only"], deployed)


class FilterModule:
    """Ansible entry point: {{ specsweep_nightly_asked | specsweep_nightly_request }}."""

    def filters(self) -> dict[str, Any]:
        return {
            "specsweep_nightly_request": request,
            "specsweep_nightly_commands": commands,
        }
