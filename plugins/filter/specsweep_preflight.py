"""An engine role's preflight and install as filters (analysis.sweep.preflight owns the rules):
`{{ llama_server_command | specsweep_version_argv(llama_server_launcher) }}`."""

from __future__ import annotations

from typing import Any

# The suite's own Python (installed in the venv by scripts/setup.sh).
from analysis.sweep.preflight import (
    llama_cpp_install_check,
    llama_cpp_version,
    local_checkpoints,
    pip_install_argv,
    sglang_check_input,
    sglang_found,
    target_identity,
    version_argv,
)


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "specsweep_llama_install_check": llama_cpp_install_check,
            "specsweep_llama_version": llama_cpp_version,
            "specsweep_version_argv": version_argv,
            "specsweep_pip_install_argv": pip_install_argv,
            "specsweep_local_checkpoints": local_checkpoints,
            "specsweep_target_identity": target_identity,
            "specsweep_sglang_check_input": sglang_check_input,
            "specsweep_sglang_found": sglang_found,
        }
