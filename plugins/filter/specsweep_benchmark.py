"""The benchmark client's argv and installed files as filters:
`{{ benchmark_settings | specsweep_client_argv }}`, `{{ benchmark_launch | specsweep_client_launch }}`."""

from __future__ import annotations

from typing import Any

# The suite's own Python (installed in the venv by scripts/setup.sh).
from analysis.sweep.client import client_argv, install_files, launch_argv


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "specsweep_client_argv": client_argv,
            "specsweep_client_launch": launch_argv,
            "specsweep_install_files": install_files,
        }
