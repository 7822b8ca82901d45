"""The sweep's results folder on the controller, in the ansible-playbook process.

An action plugin, not a module: it runs between two configs, and a module round trip there (fork,
AnsiballZ, a fresh Python) costs more than the work. Each call is one of:
- start: whether this host measures a config now (resume, shard claims) and its progress line;
- fact: write one (host, config) fact, from what the config's tasks registered (or, when the
  controller cannot, hand it back to be kept on the host);
- kept: record the facts an earlier run of the sweep kept on this host, and remove the host's copies;
- preflight: write what a host is and what stops it (<sweep>/<host>.preflight.json);
- unrecorded: which of this host's shared launches no host has a fact of yet (shard mode's last pass);
- finalists: which configs to launch once more before a winner is named (analysis.running.race).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

# The suite's own Python (installed in the venv by scripts/setup.sh).
from analysis.facts import record
from analysis.facts.schema import SchemaError, load_fact, to_dict
from analysis.files import write_json_atomic
from analysis.report import closecall
from analysis.running import prior, progress, race
from analysis.sweep import hostplan, launchprior, lease, order, outcome, sweeplock
from analysis.sweep.config import Config
from analysis.sweep.hostplan import HostPlan, Slot

KINDS = ("start", "fact", "kept", "preflight", "unrecorded", "finalists")


def plain(value: Any) -> Any:
    """Ansible's templated values as plain JSON types (the schema checks exact types)."""
    return json.loads(json.dumps(value))


class ActionModule(ActionBase):
    """start / fact / preflight, with `where` (dir, run_id, host, follows) or `path`."""

    TRANSFERS_FILES = False
    _requires_connection = False
    # start: where, index, total, claimed, retake, launch, race; fact: where, failed_result, log_tail;
    # kept (true): where;
    # preflight: host_plan, path; unrecorded (true): where; finalists (true): where.
    _VALID_ARGS = frozenset(KINDS).union(
        ("where", "index", "total", "claimed", "retake", "failed_result", "log_tail", "host_plan", "path",
         "launch", "race")
    )  # fmt: skip

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = plain(self._task.args)
        kinds = [k for k in KINDS if k in args]
        if len(kinds) != 1:
            raise AnsibleActionFail(f"specsweep_results needs exactly one of {', '.join(KINDS)}")
        if kinds[0] == "start":
            return {**result, **self._start(args, task_vars or {})}
        if kinds[0] == "preflight":
            return {**result, **self._preflight(args)}
        if kinds[0] == "unrecorded":
            host = hostplan.of((task_vars or {})["specsweep_plan"], args["where"]["host"])
            slots = progress.unrecorded_slots(Path(args["where"]["dir"]), host)
            return {**result, "changed": False, "slots": [hostplan.dump(s) for s in slots]}
        if kinds[0] == "finalists":
            return {**result, **self._finalists(args, task_vars or {})}
        if kinds[0] == "kept":
            return {**result, **self._kept(args["where"], task_vars or {})}
        return {**result, **self._fact(args)}

    def _start(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        if self._task.check_mode:
            return {"changed": False, "measure": True, "started_at": 0.0, "specsweep_say": ""}
        sweep = task_vars["specsweep_plan"]["sweep"]
        config = hostplan.load(Config, args["start"])
        shared = progress.claims_first(sweep["settings"]["mode"], config, bool(args.get("claimed")))
        # Hosts of the run that left it (unreachable, failed): their shard claims are taken over.
        lost = set(sweep["hosts"]) - set(task_vars["ansible_play_hosts"])
        started = progress.start(
            args["where"], config.id, int(args["index"]), int(args["total"]), shared,
            since=float(sweep["run_started_at"]), lost=lost, retake=bool(args.get("retake")),
            launch=int(args.get("launch") or 1), race=bool(args.get("race")),
        )  # fmt: skip
        # A host waiting here for another host's claim keeps its lease (analysis.sweep.lease).
        if started.get("wait") and (
            lost := lease.keep_while_waiting(task_vars, self._task._uuid, self._execute_module)
        ):
            raise AnsibleActionFail(lost)
        return {"changed": False, **started}

    def _fact(self, args: dict[str, Any]) -> dict[str, Any]:
        where = args["where"]
        config_id = args["fact"]["config"]["id"]
        if self._task.check_mode:
            return {"changed": False, "status": "ok"}
        if where.get("follows"):
            # A follower records nothing of its own: its leader's facts cover it.
            return {"changed": False, "status": "followed"}
        # Every line names the launch as its file does: baseline.launch2, not baseline.
        name = order.fact_name(config_id, int(args["fact"].get("launch_index") or 1))
        path = Path(where["dir"], where["host"], f"{name}.json")
        built = outcome.payload(args["fact"], args.get("failed_result"), args.get("log_tail") or [])
        try:
            fact = record.build_fact(built)
        except (KeyError, TypeError, ValueError) as exc:
            raise AnsibleActionFail(f"{path}: not a valid fact: {exc}") from None  # the message says it all
        try:
            write_json_atomic(path, to_dict(fact))
        except OSError as exc:
            # A full or read-only results disk: the measurement stays on the host (the task after this
            # one copies it there), the run's end lists it, and -e resume records it (`kept`).
            dest = f"{where['run_dir']}/{record.kept_name(fact.sweep_id, path.stem)}"
            say = (
                f"{where['host']}/{name}: fact not written to {path}: {exc.strerror or exc}; kept on "
                f"{where['host']} at {dest}; free space, then -e resume={fact.sweep_id} records it"
            )
            note = {"name": path.stem, "dest": dest}  # what the run's end lists (specsweep_report)
            kept = {**note, "note": note, "content": json.dumps(to_dict(fact), indent=1)}
            return {"changed": False, "status": "kept", "kept": kept, "specsweep_say": say}
        if where.get("followed"):
            # This run's marker (an earlier run's fact must not release the followers).
            marker = Path(where["dir"], ".claims", where["run_id"], f"{where['host']}-{name}.recorded")
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
        say = f"{name}: recorded"
        if fact.failure is not None:
            why = fact.failure
            say = f"{name}: failed in {why.phase}: {why.cause} ({why.message[:200]})"
        return {"changed": True, "status": fact.status, "path": str(path), "specsweep_say": say}

    def _kept(self, where: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        """Record the facts an earlier run kept on this host (its controller's disk was full) before
        anything is measured, so that resume does not measure them again; then remove them there."""
        if self._task.check_mode:
            return {"changed": False, "recorded": [], "specsweep_say": ""}
        sweep_id = Path(where["dir"]).name

        def on_host(module: str, **module_args: Any) -> dict[str, Any]:
            done = self._execute_module(module, module_args=module_args, task_vars=task_vars)
            if done.get("failed"):
                raise AnsibleActionFail(f"{where['host']}: {module} {module_args}: {done.get('msg')}")
            return done

        pattern = record.kept_pattern(sweep_id)
        found = on_host("ansible.builtin.find", paths=where["run_dir"], patterns=pattern)
        recorded = []
        for kept in sorted(f["path"] for f in found["files"]):
            content = base64.b64decode(on_host("ansible.builtin.slurp", src=kept)["content"])
            try:
                fact = load_fact(json.loads(content))
            except (ValueError, SchemaError) as exc:
                raise AnsibleActionFail(f"{where['host']}:{kept}: not a valid fact: {exc}") from None
            if (fact.sweep_id, fact.host) != (sweep_id, where["host"]):
                continue  # another sweep's, whose id starts with this one's and a dot
            # A kept fact joins the sweep's table only if measured as this run's plan says.
            otherwise = self._measured_otherwise(fact, where["host"], task_vars["specsweep_plan"])
            if otherwise:
                raise AnsibleActionFail(
                    f"{otherwise}: the fact kept at {where['host']}:{kept} was measured under another "
                    "plan, which one table must not mix; resume with the settings it was measured with"
                )
            name = order.fact_name(fact.config.id, fact.launch_index)
            path = Path(where["dir"], where["host"], f"{name}.json")
            try:
                write_json_atomic(path, to_dict(fact))
            except OSError as exc:
                raise AnsibleActionFail(
                    f"{where['host']}/{name}: kept fact not written to {path}: {exc.strerror or exc}; "
                    f"it stays on {where['host']} at {kept}"
                ) from None
            on_host("ansible.builtin.file", path=kept, state="absent")
            recorded.append(name)
        say = f"recorded the facts an earlier run kept on {where['host']}: {', '.join(recorded)}"
        return {"changed": bool(recorded), "recorded": recorded, "specsweep_say": say if recorded else ""}

    @staticmethod
    def _measured_otherwise(fact: Any, host: str, plan: dict[str, Any]) -> str | None:
        """sweeplock's sentence for a kept fact measured otherwise than this plan says (a config the
        plan no longer has on this host too)."""
        entries = [e for e in hostplan.of(plan, host).entries if e.config.id == fact.config.id]
        if not entries:
            return f"{host}/{fact.config.id} is not in this run's plan"
        return sweeplock.measured_otherwise(to_dict(fact), host, entries[0], plan["sweep"]["settings"])

    def _finalists(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        """One more launch of each finalist: the grid's speculative configs (launch N+1; the baseline
        too where the host's history spared it its again-launch) and a step search's probes (launch
        2), judged on this host's (or its leader's) launches 1..N."""
        where = args["where"]
        if self._task.check_mode:
            return {"changed": False, "slots": [], "specsweep_say": ""}
        plan = task_vars["specsweep_plan"]
        launches = int(plan["sweep"]["settings"]["launches"])
        host_plan = hostplan.of(plan, where["host"])
        launch_prior = host_plan.launch_prior
        speculative = {e.config.id: e.config.speculative for e in host_plan.entries}
        position = {e.config.id: i for i, e in enumerate(host_plan.entries)}
        entry = {
            c: position[c]
            for c in launchprior.candidates(speculative.items(), bool(host_plan.closing), launch_prior)
        }
        searched = {e.config.id for e in host_plan.entries if e.searched}
        host_dir = Path(where["dir"], where.get("follows") or where["host"])
        data = race.table(race.facts(host_dir), max_launch=launches, sweep_dir=host_dir.parent)
        # A config whose fact this run kept on the host (a full results disk) cannot be judged here.
        kept = {k["name"].split(".launch")[0] for k in task_vars.get("specsweep_kept") or []}
        # Each finalist's relaunch measures the levels it is a finalist at (all: no --only).
        judged = prior.finalist_levels(data, [c for c in entry if c not in kept], launch_prior)
        chosen = {c: prior.only(data, levels) for c, levels in judged.items()}
        # Said where a relaunch measures some levels only: "s1 (at c=4 chat)".
        at = {c: ", ".join(closecall.level_text(lv) for lv in judged[c]) for c in chosen if chosen[c]}
        named = ", ".join(c + (f" (at {at[c]})" if c in at else "") for c in chosen)
        out = [
            hostplan.dump(Slot(**order.slot(c, 2 if c in searched else launches + 1, order.FINALIST,
                                            speculative[c]), entry=entry[c], levels=levels))
            for c, levels in chosen.items()
        ]  # fmt: skip
        dropped = [order.fact_name(c, 2 if c in searched else launches + 1) for c in entry if c in kept]
        say = (
            f"finalists (the best and those within noise of it), launched once more before a winner "
            f"is named: {named}"
            if chosen
            else ""
        )
        if launch_prior and launch_prior.from_history:
            close = closecall.too_close(data, launch_prior)
            say = (
                f"finalists at a launch spread of {launch_prior.cv_pct:.1f}% ({launch_prior.source}): "
                + (f"{named} (a close call), launched once more" if chosen else
                   "none, every level's decision is clear or too close to call at that spread")
                + "".join(f"; {c}" for c in close)
            )  # fmt: skip
        return {"changed": False, "slots": out, "dropped": dropped, "specsweep_say": say}

    def _preflight(self, args: dict[str, Any]) -> dict[str, Any]:
        host_plan = hostplan.load(HostPlan, args["host_plan"])
        found = args["preflight"] or {}
        problems = [*host_plan.problems, *found.get("problems", [])]
        preflight = {**found, "problems": problems, "engine": host_plan.engine}
        if not self._task.check_mode:
            write_json_atomic(Path(args["path"]), preflight)
        say = "; ".join(problems) if problems else ""
        return {"changed": False, "record": preflight, "problems": problems, "specsweep_say": say}
