"""An engine role's preflight and install as filters (analysis.engines owns the rules: each engine's
module its own, analysis.engines.preflight what they share):
`{{ llama_server_command | specsweep_version_argv(llama_server_launcher) }}`."""

from __future__ import annotations

from typing import Any

# The suite's own Python (installed in the venv by scripts/setup.sh).
from analysis.engines import ENGINES, llama_cpp
from analysis.engines.preflight import local_checkpoints, pip_install_argv, target_identity


def engine_clients(engine: str) -> list[str]:
    """The benchmark clients that drive `engine` (none for an engine outside the list)."""
    known = ENGINES.get(engine)
    return list(known.clients) if known else []


def engine_check_input(entries: list[dict[str, Any]], engine: str) -> dict[str, Any]:
    """What an engine's preflight check reads on the host: the plan's entries, as its module says."""
    return ENGINES[engine].check_input(entries)


def engine_found(checked: dict[str, Any], engine: str, on: dict[str, Any]) -> dict[str, Any]:
    """What an engine's preflight check found on the host, read by that engine's module."""
    return ENGINES[engine].found(checked, on)


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "specsweep_llama_install_check": llama_cpp.install_check,
            "specsweep_llama_version": llama_cpp.found_version,
            "specsweep_version_argv": llama_cpp.version_argv,
            "specsweep_pip_install_argv": pip_install_argv,
            "specsweep_local_checkpoints": local_checkpoints,
            "specsweep_target_identity": target_identity,
            "specsweep_engine_clients": engine_clients,
            "specsweep_engine_check_input": engine_check_input,
            "specsweep_engine_found": engine_found,
        }
