"""Plan a sweep on the controller, once, before any host is touched (run_once).

Checks the `-e` request (unknown keys included) and the tags, resolves each targeted host's
variables (role defaults, then inventory, group_vars, host_vars and -e, as Ansible ranks them),
renders every host's launches with analysis.sweep.plan and writes sweep.json and plan.json. The
result is registered on every host of the play: each host reads its own `hosts[inventory_hostname]`.
`--limit` is honoured because the hosts are the play's (ansible_play_hosts_all).
"""

from __future__ import annotations

import datetime
import functools
import json
from pathlib import Path
from typing import Any

import yaml
from ansible import context
from ansible.errors import AnsibleActionFail
from ansible.inventory.helpers import sort_groups
from ansible.plugins.action import ActionBase
from ansible.template import Templar, trust_as_template
from ansible.utils.vars import combine_vars, load_extra_vars
from ansible.vars.plugins import get_vars_from_inventory_sources

from analysis.engines import DEFAULT, ENGINES

# The suite's own Python (installed in the venv by scripts/setup.sh).
from analysis.facts.record import space_problem
from analysis.files import write_json_atomic
from analysis.running import prior
from analysis.sweep import client, hostplan, hostvars, identity, plan, request, sweeplock

REPO = Path(__file__).resolve().parents[2]
ROLES = REPO / "roles"
PHASES = ("plan", "preflight", "sweep", "report")
# Host-level variables the plan reads, with what an unset one means.
HOST_DEFAULTS: dict[str, Any] = {
    "specsweep_engine": DEFAULT,
    "specsweep_env_profiles": {},
    "specsweep_follows": None,
    "specsweep_lock_path": "",
}


@functools.cache
def role_variables() -> frozenset[str]:
    """Every variable a role of the suite documents (its defaults and its argument specs)."""
    names: set[str] = set()
    for role in ROLES.iterdir():
        defaults = (
            yaml.safe_load((role / "defaults" / "main.yml").read_text())
            if (role / "defaults").is_dir()
            else {}
        )
        names |= set(defaults or {})
        specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
        names |= {option for spec in specs.values() for option in spec.get("options", {})}
    return frozenset(names)


def phases() -> dict[str, bool]:
    """Which phases `--tags` / `--skip-tags` select; AnsibleActionFail when they make no sense."""
    tags = set(context.CLIARGS.get("tags") or ("all",))
    skip = set(context.CLIARGS.get("skip_tags") or ())
    named = (tags | skip) - {"all", "always", "tagged", "untagged"}
    unknown = sorted(named - set(PHASES))
    if unknown:
        raise AnsibleActionFail(
            f"--tags/--skip-tags {', '.join(unknown)}: not a phase of the sweep; the phases are "
            f"{', '.join(PHASES)} (plan always runs)"
        )
    if "always" in skip or "plan" in skip:
        raise AnsibleActionFail("--skip-tags: the plan always runs (it checks the request before any host)")
    chosen = {p: ("all" in tags or p in tags) and p not in skip for p in PHASES[1:]}
    if chosen["sweep"] and "preflight" in skip:
        raise AnsibleActionFail(
            "--skip-tags preflight: the sweep needs it (the host lock and the engine check)"
        )
    chosen["preflight"] = chosen["preflight"] or chosen["sweep"]
    return chosen


class ActionModule(ActionBase):
    """No arguments: the request is the play's -e values and `specsweep_request`."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset()

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        assert task_vars is not None
        selected = phases()
        extra = load_extra_vars(self._loader)
        problems = request.unknown_keys(extra, role_variables())
        given = {k: v for k, v in extra.items() if k in request.BY_NAME}
        # A play var arrives as its template (the nightly's filter expression): render it first.
        defaults = self._templar.template(task_vars.get("specsweep_request")) or {}
        req = request.read(given, defaults)
        if problems or req.errors:
            raise AnsibleActionFail("Invalid sweep request: " + " | ".join(problems + req.errors))
        targeted = task_vars["ansible_play_hosts_all"]
        # Every variable the suite reads, from wherever it came, before anything is written.
        bad = [p for h in targeted for p in self._check_variables(task_vars, h, extra)]
        if bad:
            raise AnsibleActionFail("Invalid host variables: " + " | ".join(dict.fromkeys(bad)))
        hosts = {h: self._host(task_vars, h) for h in targeted}
        results_dir = Path(req["results_dir"] or REPO / "results")
        # `--tags report` alone reports an existing sweep: it names one and writes no plan over its own.
        only_report = selected["report"] and not selected["preflight"]
        ident = self._identity(req, results_dir, only_report)
        if req["resume"]:
            # A resumed sweep measures as it did (its grid, traffic, mix, order and seed, as sweep.json
            # recorded them) in what -e does not change.
            earlier = json.loads((Path(ident.sweep_dir) / "sweep.json").read_bytes())["settings"]
            req = request.read(given, {**defaults, **request.resumed(earlier, given)})
            if req.errors:
                raise AnsibleActionFail("Invalid sweep request: " + " | ".join(req.errors))
        # Each host's launch spread from its earlier sweeps here (this sweep's own left out).
        built = plan.build(
            req, hosts, ident, results_dir,
            lambda host, engine, model: prior.from_history(results_dir, host, engine, model, ident.sweep_id),
        )  # fmt: skip
        if built["errors"]:
            raise AnsibleActionFail("Invalid sweep request: " + " | ".join(built["errors"]))
        owner = identity.run_owner(ident.run_id, ident.sweep_id, req["lease_s"])
        document = plan.document(built)
        if not (self._task.check_mode or only_report):
            full = space_problem(results_dir, sum(len(h["entries"]) for h in built["hosts"].values()))
            if full:
                raise AnsibleActionFail("Invalid sweep request: " + full)
            # This sweep id's controller lock first: a second run of it writes nothing.
            held = sweeplock.acquire(sweeplock.lock_path(results_dir, ident.sweep_id), owner)
            if held:
                raise AnsibleActionFail(held)
            hosts_plans = {n: hostplan.of(built, n) for n in built["hosts"]}
            mixed = sweeplock.other_plan(Path(ident.sweep_dir), hosts_plans, req.values)
            if mixed:
                raise AnsibleActionFail(
                    f"sweep {ident.sweep_id} holds facts measured under another plan, which one table must "
                    f"not mix: {'; '.join(mixed)}. Choose another sweep_id, or measure as they were."
                )
            self._write(Path(ident.sweep_dir), ident.run_id, document)
        say = plan.describe(document) if req["plan_only"] else plan.headline(built["sweep"], built["hosts"])
        return {**result, "changed": False, **built, "owner": owner, "phases": selected, "specsweep_say": say}

    def _host(self, task_vars: dict[str, Any], host: str) -> plan.HostInput:
        """A host's engine settings and sweep variables, resolved as Ansible would for its tasks."""
        raw = task_vars["hostvars"].raw_get(host)
        value = self._resolver(raw, {})
        engine = value("specsweep_engine", HOST_DEFAULTS["specsweep_engine"])
        spec = ENGINES.get(str(engine))
        process = self._resolver(raw, self._defaults("server_process"))
        run_dir = str(process("server_process_run_dir"))
        # benchmark_python is the host's interpreter, which may name the controller's (the embedded
        # localhost's is ansible_playbook_python, a variable of the play, not of the host).
        play = {"ansible_playbook_python": task_vars["ansible_playbook_python"]}
        bench = self._resolver({**play, **raw}, self._defaults("benchmark"))
        settings = {}
        if spec is not None:
            resolve = self._resolver(raw, self._defaults(spec.role))
            settings = {key: resolve(f"{spec.role}_{key}", None) for key in spec.settings}
        return plan.HostInput(
            name=host,
            engine=str(engine),
            settings=settings,
            env_profiles=value("specsweep_env_profiles", {}) or {},
            follows=value("specsweep_follows", None),
            run_dir=run_dir,
            lock_path=value("specsweep_lock_path", "") or f"{run_dir}/sweep.lock",
            client=str(bench("benchmark_client")),
            benchmark={key: bench(f"benchmark_{key}") for key in client.ROLE_DEFAULTS},
            local=value("ansible_connection", "ssh") == "local",
        )

    def _check_variables(self, task_vars: dict[str, Any], host: str, extra: dict[str, Any]) -> list[str]:
        """analysis.sweep.hostvars.check of one host: its variables by source, highest precedence first."""
        inventory = task_vars["hostvars"]._inventory
        sources = inventory._sources

        def own(entity: Any) -> dict[str, Any]:
            # Inline inventory vars, and host_vars/ or group_vars/ files (vars plugins run on demand).
            return combine_vars(entity.get_vars(), get_vars_from_inventory_sources(
                self._loader, sources, [entity], "task"))  # fmt: skip

        entity = inventory.get_host(host)
        layers = [("-e", extra), (f"host vars of {host}", own(entity))]
        layers += [(f"group vars of {g.name}", own(g)) for g in reversed(sort_groups(entity.get_groups()))]
        raw = task_vars["hostvars"].raw_get(host)
        resolve = self._resolver(raw, {})
        return hostvars.check(host, layers, hostvars.role_options(ROLES), resolve)

    def _defaults(self, role: str) -> dict[str, Any]:
        """A role's defaults as Ansible loads them: templates left to render per host (loader-cached)."""
        path = ROLES / role / "defaults" / "main.yml"
        return self._loader.load_from_file(str(path), trusted_as_template=True) or {}

    def _resolver(self, raw: dict[str, Any], defaults: dict[str, Any]) -> Any:
        """value(name[, default]): a variable templated with the host's variables over `defaults`."""
        templar = Templar(loader=self._loader, variables={**defaults, **raw})
        missing = object()

        def value(name: str, default: Any = missing) -> Any:
            if name not in defaults and name not in raw:
                if default is missing:
                    raise AnsibleActionFail(f"{name}: not defined for this host")
                return default
            return templar.template(trust_as_template("{{ " + name + " }}"))

        return value

    @staticmethod
    def _identity(req: request.Request, results_dir: Path, only_report: bool) -> plan.Identity:
        """The sweep id (given, resumed, or a UTC timestamp) and this run's id."""
        now = datetime.datetime.now(datetime.UTC)
        sweep_id = req["resume"] or req["sweep_id"] or now.strftime("%Y%m%dT%H%M%SZ")
        sweep_dir = results_dir / sweep_id
        if req["resume"] and not (sweep_dir / "sweep.json").is_file():
            raise AnsibleActionFail(f"Invalid sweep request: resume: no sweep {sweep_id!r} in {results_dir}")
        if only_report and not sweep_dir.is_dir():
            raise AnsibleActionFail(
                f"Invalid sweep request: sweep_id: --tags report reports an existing sweep; "
                f"name one of {results_dir} with -e sweep_id=<id>"
            )
        return plan.Identity(
            sweep_id=sweep_id,
            sweep_dir=str(sweep_dir),
            run_id=now.strftime("%Y%m%dT%H%M%S%fZ"),
            git_rev=identity.git_rev(REPO),
            repo=str(REPO),
            started_at=now.timestamp(),
        )

    @staticmethod
    def _write(sweep_dir: Path, run_id: str, document: dict[str, Any]) -> None:
        """sweep.json (the request, for people and resume), plan.json, and this run's claims folder."""
        write_json_atomic(sweep_dir / "sweep.json", document["sweep"])
        write_json_atomic(sweep_dir / "plan.json", document)
        # Shard claims and search probes are atomic mkdirs under this run's folder.
        (sweep_dir / ".claims" / run_id).mkdir(parents=True, exist_ok=True)
