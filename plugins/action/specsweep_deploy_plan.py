"""Choose what each host of a deploy gets, on the controller, once, before any host is touched (run_once).

Reads `-e from=<sweep dir>` (with `concurrency`, `mix` or `config`), each host's `deploy_port` (the deploy
role's default unless set) and its engine's api key, and asks analysis.deploy.choice for each host's
config, production argv and env, and the sweep's figures. Bad input fails here with one sentence.
The result is registered on every host of the play; each reads its own `targets[inventory_hostname]`.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.template import Templar, trust_as_template

# The suite's own Python (installed in the venv by scripts/setup.sh).
from analysis.deploy.choice import DeployError, HostInput, choose
from analysis.engines import DEFAULT, ENGINES

ROLES = Path(__file__).resolve().parents[2] / "roles"


class ActionModule(ActionBase):
    """No arguments: the request is the run's -e values (from, concurrency, mix, config, deploy_canary)."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset()

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        assert task_vars is not None
        hosts = list(task_vars["ansible_play_hosts_all"])
        source = task_vars.get("from")
        if not source:
            raise AnsibleActionFail(
                "Invalid deploy request: from: name the sweep, -e from=results/<sweep_id>"
            )
        concurrency = self._int(task_vars.get("concurrency"), "concurrency")
        config = task_vars.get("config") or None
        mix = task_vars.get("mix") or None
        if mix is not None and not isinstance(mix, str):
            raise AnsibleActionFail(
                f"Invalid deploy request: mix: {mix!r} is not workload=share,... (e.g. chat=0.7,code=0.3)"
            )
        canary = task_vars.get("deploy_canary") or hosts[0]
        if canary not in hosts:
            raise AnsibleActionFail(
                f"Invalid deploy request: deploy_canary: {canary} is not a host of this deploy "
                f"({', '.join(hosts)})"
            )
        sweep_dir = Path(str(source)).expanduser()
        try:
            targets = choose(
                sweep_dir, [self._host(task_vars, h) for h in hosts], concurrency, config, mix=mix
            )
        except DeployError as exc:
            raise AnsibleActionFail(f"Invalid deploy request: {exc}") from None
        say = "\n".join(
            f"deploy {t['sweep_id']} -> {h}{' (canary)' if h == canary else ''}: {t['config']} at "
            f"concurrency {t['concurrency']} ({t['why']}) on port {t['port']}"
            for h, t in targets.items()
        )
        history = task_vars.get("deploy_history") or str(sweep_dir.resolve().parent / "history.sqlite")
        run_id = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S%fZ")
        return {**result, "changed": False, "targets": targets, "canary": canary, "history": history,
                "run_id": run_id, "specsweep_say": say}  # fmt: skip

    @staticmethod
    def _int(value: Any, name: str) -> int | None:
        """An optional whole number from -e."""
        if value in (None, ""):
            return None
        try:
            return int(value)
        except (TypeError, ValueError):
            raise AnsibleActionFail(
                f"Invalid deploy request: {name}: {value!r} is not a whole number"
            ) from None

    def _host(self, task_vars: dict[str, Any], host: str) -> HostInput:
        """A host's production port and api key, resolved over the deploy and engine roles' defaults."""
        raw = task_vars["hostvars"].raw_get(host)
        engine = ENGINES.get(str(raw.get("specsweep_engine", DEFAULT)))
        defaults = self._defaults("deploy") | (self._defaults(engine.role) if engine else {})
        templar = Templar(loader=self._loader, variables={**defaults, **raw})
        key_name = f"{engine.role}_api_key" if engine else ""

        def value(name: str) -> Any:
            known = name in defaults or name in raw
            return templar.template(trust_as_template("{{ " + name + " }}")) if known else None

        port = self._int(value("deploy_port"), f"deploy_port of {host}")
        return HostInput(name=host, port=port or 0, api_key=str(value(key_name) or "") if key_name else "")

    def _defaults(self, role: str) -> dict[str, Any]:
        """A role's defaults as Ansible loads them (templates left to render per host)."""
        path = ROLES / role / "defaults" / "main.yml"
        return self._loader.load_from_file(str(path), trusted_as_template=True) or {}
