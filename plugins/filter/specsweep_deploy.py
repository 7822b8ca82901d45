"""A rollout's decisions on the host as filters (analysis.deploy.rollout owns them):
`{{ deploy_launcher | specsweep_deploy_launcher(deploy_systemd_booted) }}`."""

from __future__ import annotations

from typing import Any

# The suite's own Python (installed in the venv by scripts/setup.sh).
from analysis.deploy.rollout import (
    before_words,
    failure_words,
    launcher,
    read_state,
    serves_already,
    settled_words,
    state,
)


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "specsweep_deploy_launcher": launcher,
            "specsweep_deployed_state": state,
            "specsweep_serves_already": serves_already,
            "specsweep_settled_words": settled_words,
            "specsweep_deployed_read": read_state,
            "specsweep_before_words": before_words,
            "specsweep_deploy_failure": failure_words,
        }
