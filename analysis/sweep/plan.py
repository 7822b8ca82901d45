"""The plan of a sweep: the request checked, the grid built, and every host's exact launches.

Built once on the controller (plugins/action/specsweep_plan.py calls `build`) before any host is
touched; each host then receives its own entries (config, argv, env) and launches exactly those.
`document` is what plan.json holds (secrets redacted), `describe` what an operator reads.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from analysis.engines import ENGINES, ScheduleError, SettingError
from analysis.engines.base import BUILTIN_SCHEDULE
from analysis.redact import REDACTED, redact_argv, redact_env
from analysis.sweep import client, cpuload, launchprior, levelsize, order, prefetch
from analysis.sweep import config as cfg
from analysis.sweep import estimate as est
from analysis.sweep.hostplan import AdaptiveCopy, Benchmark, Entry, HostPlan, Server, Slot, Sweep, dump, load
from analysis.sweep.launchprior import LaunchPrior
from analysis.sweep.request import Request
from analysis.workloads import build as workloads
from analysis.workloads.packages import WorkloadError

# The benchmark role's default prompt set, and the units a level sends by default (its client's
# REQUESTS_PER_LEVEL x c, at least one pass over the records).
PROMPT_SET = Path(__file__).resolve().parents[2] / "roles/benchmark/files/prompts/code.jsonl"
REQUESTS_PER_LEVEL = 4


@dataclass(frozen=True)
class HostInput:
    """What the controller knows of one targeted host: its engine and its resolved variables."""

    name: str
    engine: str
    settings: Mapping[str, Any]  # the engine role's variables by short name, defaults applied
    env_profiles: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    follows: str | None = None
    run_dir: str = "/var/tmp/specsweep"
    lock_path: str = ""
    client: str = "specsweep"  # benchmark_client: specsweep's own, or SGLang's bench_serving
    # The benchmark role's other host variables by short name (analysis.sweep.client.ROLE_DEFAULTS).
    benchmark: Mapping[str, Any] = field(default_factory=lambda: dict(client.ROLE_DEFAULTS))
    local: bool = False  # the controller itself (ansible_connection local): its load can be read


@dataclass(frozen=True)
class Identity:
    """Names of this run: the sweep (results folder) and this invocation (locks, claims)."""

    sweep_id: str
    sweep_dir: str
    run_id: str
    git_rev: str | None
    repo: str
    started_at: float  # epoch seconds: facts written since belong to this run


def duration(seconds: float) -> str:
    """A duration as people say it."""
    minutes = seconds / 60
    return (
        f"{seconds:.0f} s"
        if minutes < 2
        else f"{minutes:.0f} min"
        if minutes < 120
        else f"{minutes / 60:.1f} h"
    )


def _host_plan(
    host: HostInput,
    configs: list[cfg.Config],
    hosts: Mapping[str, HostInput],
    request: Request,
    identity: Identity,
    seed: int | None,
    records: str = "",
    priors: Priors | None = None,
    launch_costs: LaunchCosts | None = None,
) -> HostPlan:
    """One host's server, entries, the order it launches them in and the problems the controller can
    see; its launch spread from `priors` (None: the assumed one), what a launch costs it from
    `launch_costs` (None: unknown), and from both how its levels stop."""
    problems: list[str] = []
    engine = ENGINES[host.engine]
    entries = []
    # The adaptive arm's schedule, copied to the host in preflight; its argv names that copy.
    schedule = request["adaptive_config"] if request["adaptive_config"] != BUILTIN_SCHEDULE else None
    dest = f"{host.run_dir}/{identity.sweep_id}.adaptive.json"
    copy = AdaptiveCopy(src=schedule, dest=dest) if schedule else None
    # This run's own client folder: another run (a plan-only one, one the lock refuses) never
    # changes the client or the records this one reads, and its end removes the folder whole.
    client_dir = f"{str(host.benchmark['work_dir']).rstrip('/')}/{identity.run_id}"
    # The levels size a GPU engine's capacity, the same on every config (e.g. analysis.engines.sglang).
    levels = request["concurrency"]
    # The adaptive arm's schedule: the host's copy (SGLang reads the file) and the controller's (vLLM
    # inlines it into --speculative-config).
    given = request["adaptive_config"] or None
    settings = {
        **host.settings,
        "adaptive_config_path": copy and copy.dest,
        "adaptive_config": given,
        "levels": levels,
    }
    slots = max(levels)
    server: Server | None
    benchmark = stopping = None
    # A follower runs its leader's order: the same key seeds the same shuffle, and the leader's
    # history (its facts are the ones judged) says whether the baseline is launched again.
    key = host.follows or host.name
    launch_prior = None
    try:
        server = Server(**engine.server(settings))
        launch_prior = priors(key, host.engine, server.model) if priors else launchprior.ASSUMED
        cost = launch_costs(host.engine, server.model) if launch_costs else None
        stopping = levelsize.sizing(
            request["bench_ci_pct"], request["bench_level_budget_s"], launch_prior, cost
        )
        role = {**host.benchmark, "client": host.client, "work_dir": client_dir}
        argv = client.host_argv(role, dump(server), request.values, records, stopping.settings())
        benchmark = Benchmark(client=host.client, argv=argv)
        base = engine.base_env(settings)
        for config in configs:
            env = cfg.merge_env(base, host.env_profiles.get(config.env_profile))
            argv = engine.argv(config, settings, slots)
            # A step search chooses these itself, one probe at a time; every other config is run in order.
            searched = bool(request["search"]) and config.speculative and not config.adaptive
            entries.append(Entry(config=config, argv=argv, env=env, searched=searched))
    except (SettingError, ValueError) as exc:
        server = benchmark = stopping = launch_prior = None
        problems.append(f"{engine.role}_{exc}" if isinstance(exc, SettingError) else str(exc))
    if host.client not in engine.clients:
        problems.append(
            f"benchmark_client: {host.client} does not drive {host.engine} "
            f"(its clients: {', '.join(engine.clients)})"
        )
    problems += _follow_problems(host, hosts, request)
    grid = [(e.config.id, e.config.speculative) for e in entries if not e.searched]
    every = launchprior.baseline_every(request["baseline_every"], launch_prior)
    ordered, closing = order.schedule(grid, request["launches"], seed, key, every)
    position = {e.config.id: i for i, e in enumerate(entries)}
    followed = sorted(h.name for h in hosts.values() if h.follows == host.name)
    return HostPlan(
        engine=host.engine,
        role=engine.role,
        server=server,
        benchmark=benchmark,
        entries=entries,
        order=[Slot(**s, entry=position[s["id"]]) for s in ordered],
        closing=[Slot(**s, entry=position[s["id"]]) for s in closing],
        problems=problems,
        follows=host.follows,
        followed_by=followed,
        run_dir=host.run_dir,
        client_dir=client_dir,
        lock_path=host.lock_path or f"{host.run_dir}/sweep.lock",
        adaptive_config=copy,
        launch_prior=launch_prior,
        stopping=stopping,
        prefetch=prefetch.paths(host.engine, host.settings, request["prefetch"]) if server else [],
    )


def _follow_problems(host: HostInput, hosts: Mapping[str, HostInput], request: Request) -> list[str]:
    """Multi-node: a rank >= 1 runs its part of each of its leader's configs, in a plain sweep."""
    rank = host.settings.get("node_rank")
    if host.follows is None:
        if ENGINES[host.engine].multinode and rank not in (None, "", 0, "0"):
            need = "specsweep_follows: <the rank-0 host> (it serves no requests of its own)"
            return [f"node rank {rank} on {host.name} needs {need}"]
        return []
    leader = hosts.get(host.follows)
    if leader is None or leader.name == host.name or leader.follows is not None:
        why = "another targeted host that follows no one"
    elif request["mode"] != "replicate" or request["search"] or request["race"]:
        # race is on by default with launches >= 2: the fix is named.
        why = "followed in a plain replicate sweep (no shard mode, no search, race=false)"
    else:
        return []
    return [
        f"specsweep_follows: {host.follows} must be {why}: the follower runs the leader's configs in order"
    ]


class Launches(NamedTuple):
    """Launches one host makes: `certain` whatever is measured but racing; at most `close_call`
    more (finalists on a close call); at most `racable` of the certain ones left out (a config's
    later launches, raced out once it is clearly behind)."""

    certain: int
    close_call: int
    racable: int


def launches_per_host(configs: list[cfg.Config], hosts: Mapping[str, HostPlan], request: Request) -> Launches:
    """Launches one host makes: each of `launches`, the baseline's again, the finalists; a search's
    probes at most all. Finalists: on an assumed launch spread (25%) nearly every config is within
    noise of the best, so all of them, certain; on a host's known spread a close call's best and
    rivals among the candidates (launchprior.candidates), a clear decision none
    (analysis.running.prior): launches that may not happen. Racing: a speculative config's launches
    after its first, which a clear loss leaves out (analysis.running.race)."""
    spec = sum(c.speculative for c in configs)
    n_hosts = max(len(hosts), 1)
    plans = list(hosts.values())
    slots = [*plans[0].order, *plans[0].closing] if plans else []
    own = sum(not s.speculative for s in slots)
    racable = sum(s.speculative and s.launch >= 2 for s in slots) if request["race"] else 0
    if request["search"]:
        shared = -(-spec // n_hosts)
    else:
        shared = sum(s.speculative for s in slots)
        shared = -(-shared // n_hosts) if request["mode"] == "shard" else shared
    if not request["finalists"] or spec == 0 or request["search"]:
        return Launches(own + shared, 0, racable)
    known = bool(plans) and all(p.launch_prior and p.launch_prior.from_history for p in plans)
    if not known:
        return Launches(own + shared + shared, 0, racable)
    offered = launchprior.candidates(
        ((c.id, c.speculative) for c in configs), bool(plans[0].closing), plans[0].launch_prior
    )
    return Launches(own + shared, len(offered) if len(offered) >= 2 else 0, racable)


def _tenths(x: float) -> float:
    """x to a tenth; a whole number as an int (plan.json and the text say 3, not 3.0)."""
    tenths = round(float(x), 1)
    return int(tenths) if tenths.is_integer() else tenths


def _levels(request: Request, traffic: Mapping[str, Any] | None) -> list[est.Level]:
    """What one launch sends, in the client's order: per workload and level, units, turns, tokens."""
    sets = [(s["name"], s["records"], s["turns"] / s["records"]) for s in (traffic or {}).get("sets", [])]
    sets = sets or [(None, _prompt_set_records(), 1.0)]
    return [
        est.Level(name, c, max(REQUESTS_PER_LEVEL * c, records), turns, request["max_tokens"])
        for name, records, turns in sets
        for c in request["concurrency"]
    ]


def _prompt_set_records() -> int:
    """Records of the benchmark role's default prompt set (sent when no workload is named)."""
    return len(PROMPT_SET.read_text(encoding="utf-8").splitlines())


def cpu_now(host: HostInput) -> tuple[float, float] | None:
    """A CPU engine's (cores it would get now, its threads) on a host that is the controller: the
    cores others keep busy now say how many others run (analysis.sweep.cpuload,
    analysis.sweep.estimate.free_cores); None elsewhere."""
    if not host.local or not ENGINES[host.engine].cpu_bound:
        return None
    need = float(host.settings.get("threads") or 1)
    return est.free_cores(cpuload.busy_cores(), os.cpu_count() or 1, need), need


def measure(request: Request, stopping: levelsize.LevelSizing | None) -> est.Measure:
    """How a host's levels are driven: the sweep's settings, stopping as its rule says."""
    rule = stopping or levelsize.sizing(request["bench_ci_pct"], request["bench_level_budget_s"], None, None)
    return est.Measure(
        repeats=request["repeats"],
        warmup=request["warmup"],
        requests=request["bench_requests"],
        duration_s=request["bench_duration_s"],
        ci_pct=rule.ci_pct,
        min_requests=request["bench_min_requests"],
        budget_s=rule.budget_s,
        rate=request["request_rate"],
        launch_cost_s=rule.launch_cost_s,
        launch_cv_pct=rule.launch_cv_pct,
    )


def estimate(
    configs: list[cfg.Config],
    hosts: Mapping[str, HostPlan],
    request: Request,
    results_dir: Path,
    traffic: Mapping[str, Any] | None = None,
    cpu: Mapping[str, tuple[float, float] | None] | None = None,
) -> dict[str, Any]:
    """Launches per host and how long they take (analysis.sweep.estimate), the slowest host's;
    `cpu`: per host, cpu_now's figure."""
    made = launches_per_host(configs, hosts, request)
    # Whether a decision is close, or a config clearly behind, is known only once it is measured:
    # a close call's pair (the best and a rival) and each later launch racing may leave out are
    # counted at the odds the host's earlier sweeps give, else even; the span says the least and most.
    least_n, most_n = made.certain - made.racable, made.certain + made.close_call
    span_by = [by for by, count in (("racing", made.racable), ("finalists", made.close_call)) if count]
    prior = next(iter(hosts.values())).launch_prior if hosts else None
    odds = launchprior.odds(prior, span_by)
    pair = min(made.close_call, launchprior.FINALIST_LAUNCHES)
    # The expected count, to a tenth: a whole one would put 2.7 launches at 3 (-31% when it made 2).
    # A close call's relaunches measure its level only (analysis.running.prior.finalist_levels).
    close = _tenths(pair * odds.close_call)
    per_host = _tenths(made.certain - made.racable * odds.raced + close)
    levels = _levels(request, traffic)
    estimates = [
        (
            est.parts(
                est.history(results_dir, h.engine, h.server.model),
                h.engine, levels, m, per_host, h.server.health_timeout_s, (cpu or {}).get(n), close,
            ),
            m,
        )
        for n, h in hosts.items() if h.server
        for m in [measure(request, h.stopping)]
    ]  # fmt: skip
    span = {
        "launches_per_host": per_host, "launches_least": least_n, "launches_most": most_n, "span_by": span_by,
        "counted": odds.words,
    }  # fmt: skip
    if not estimates:
        return {"configs": len(configs), **span, "seconds": None, "text": "unknown"}
    p, slowest = max(estimates, key=lambda e: e[0].total_s)
    least, most = p.total_at(least_n), p.total_at(most_n)
    span_text = f", {duration(least)} to {duration(most)} {est.span_as(span_by)}" if span_by else ""
    each = f"load {p.load_s:.0f} s + suite {p.overhead_s:.0f} s"
    # Where a launch measures more than one level, a close call's relaunches are their own term.
    apart = close if len(levels) > 1 else 0
    relaunch = f" + {apart:g} x ({each} + benchmark {p.close_bench_s:.0f} s of one level)" if apart else ""
    text = (
        f"about {duration(p.total_s)}{span_text} (setup {p.setup_s:.0f} s + {_tenths(per_host - apart):g} x "
        f"({each} + benchmark {p.bench_s:.0f} s){relaunch})"
    )
    text += f"; assumed: {', '.join(p.assumptions)}" if p.assumptions else ""
    warning = (
        f"estimate over {duration(est.WARN_S)}: {est.lever(p, slowest)}" if p.total_s > est.WARN_S else None
    )
    return {
        "configs": len(configs),
        **span,
        "seconds": p.total_s,
        "seconds_least": least,
        "seconds_most": most,
        "setup_s": p.setup_s,
        "load_s": p.load_s,
        "overhead_s": p.overhead_s,
        "bench_s": p.bench_s,
        "close_call": close,
        "close_bench_s": p.close_bench_s,
        "cpu_free": p.cpu_free,
        "assumptions": list(p.assumptions),
        "warning": warning,
        "text": text,
    }


# What a host's history says of its launch spread: (host, engine, model) -> the prior; the caller
# reads it (analysis.running.prior.from_history: the facts layer sits above the plan's).
Priors = Callable[[str, str, str | None], LaunchPrior]
# What a launch of (engine, model) costs on the controller's history, s (None: never measured).
LaunchCosts = Callable[[str, str | None], float | None]


def build(
    request: Request,
    hosts: Mapping[str, HostInput],
    identity: Identity,
    results_dir: Path,
    priors: Priors | None = None,
) -> dict[str, Any]:
    """The whole plan, or {errors: [...]} when the request cannot be swept on these hosts; each
    host's launch spread from `priors` (None: the assumed one)."""
    errors = list(request.errors)
    configs: list[cfg.Config] = []
    warnings: list[str] = []
    engines = sorted({h.engine for h in hosts.values()})
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        errors.append(f"specsweep_engine: {', '.join(unknown)} is not one of: {', '.join(ENGINES)}")
    if errors:
        # A setting that did not parse has no value to read below (request[...] would raise).
        return {"errors": errors}
    try:
        configs, warnings = cfg.grid(
            {a.name: request[a.name] for a in cfg.AXES},
            baseline=request["baseline"],
            algorithm=request["algorithm"] or None,
            env_profiles=request["env_profiles"],
            engines=engines,
        )
    except cfg.GridError as exc:
        errors.append(str(exc))
    if request["adaptive_config"] and not errors:
        adaptive_configs, refusals, notes = _adaptive_arm(request, hosts)
        configs += adaptive_configs
        errors += refusals
        warnings += notes
    errors += _search_problems(request, configs)
    errors += _race_problems(request)
    own, refusals = _host_configs(request, configs, hosts)
    errors += refusals
    errors += _engine_refusals(configs, own, hosts, request["adaptive_config"] or None)
    missing = sorted(
        {c.env_profile for c in configs} - {cfg.DEFAULT_PROFILE}
        - set.intersection(*(set(h.env_profiles) for h in hosts.values()))
    ) if hosts else []  # fmt: skip
    if missing:
        errors.append(
            f"env_profiles: {', '.join(missing)} not defined in specsweep_env_profiles of every targeted host"
        )
    if len(configs) > request["max_configs"]:
        errors.append(
            f"max_configs: the grid has {len(configs)} configs, above the limit of {request['max_configs']}; "
            f"narrow steps/topk/draft_tokens/env_profiles, or raise it with -e max_configs={len(configs)}"
        )
    traffic = None
    if not errors:
        try:
            traffic = workloads.build(request.values, _context_tokens(hosts))
        except WorkloadError as exc:
            errors.append(str(exc))
        errors += _client_problems(traffic, hosts)
    if errors:
        return {"errors": errors}
    seed = request["order_seed"]
    if request["order"] == "random" and seed is None:
        seed = order.draw_seed()
    seed = seed if request["order"] == "random" else None
    records = traffic["records"] if traffic else ""
    plans = {
        n: _host_plan(
            h,
            [*configs, *own.get(n, [])],
            hosts,
            request,
            identity,
            seed,
            records,
            priors,
            lambda engine, model: est.history(results_dir, engine, model).launch_s,
        )
        for n, h in hosts.items()
    }
    sweep = {
        "id": identity.sweep_id,
        "dir": identity.sweep_dir,
        "run_id": identity.run_id,
        "run_started_at": identity.started_at,
        "git_rev": identity.git_rev,
        "repo": identity.repo,
        "hosts": list(hosts),
        # The seed drawn is recorded as if given: -e order_seed=N replays this order.
        "settings": {**request.values, "order_seed": seed},
        "configs": [msgspec.to_builtins(c) for c in configs],
        "warnings": warnings,
        # The workloads' records file (controller) and each set by counts and hash, never its text.
        "workloads": traffic,
        "estimate": estimate(
            configs, plans, request, results_dir, traffic, {n: cpu_now(h) for n, h in hosts.items()}
        ),
    }
    return {"errors": [], "sweep": dump(load(Sweep, sweep)), "hosts": {n: dump(p) for n, p in plans.items()}}


def _host_configs(
    request: Request, configs: list[cfg.Config], hosts: Mapping[str, HostInput]
) -> tuple[dict[str, list[cfg.Config]], list[str]]:
    """Per targeted host, the configs `host_configs` adds to the grid there (with the grid's
    algorithm), and why any of them cannot run there; hosts not targeted now are left out."""
    if request["host_configs"] and (request["mode"] != "replicate" or request["search"]):
        return {}, ["host_configs: needs mode=replicate without search (a host measures its own)"]
    grid = {c.id for c in configs}
    own: dict[str, list[cfg.Config]] = {}
    problems: list[str] = []
    for name, ids in request["host_configs"].items():
        host = hosts.get(name)
        if host is None:
            continue
        own[name] = [cfg.from_id(i, request["algorithm"] or None) for i in ids if i not in grid]
        for c in own[name]:
            shape = cfg.shape_problems(c.steps, c.topk, c.draft_tokens) if c.speculative else []
            missing = c.env_profile != cfg.DEFAULT_PROFILE and c.env_profile not in host.env_profiles
            problems += [
                f"host_configs: {name}: {c.id}: {p}"
                for p in [*shape, *cfg.engine_problems(c, host.engine)]
                + ([f"env profile {c.env_profile} not in its specsweep_env_profiles"] if missing else [])
            ]
    return own, problems


def _engine_refusals(
    configs: list[cfg.Config],
    own: Mapping[str, list[cfg.Config]],
    hosts: Mapping[str, HostInput],
    schedule: str | None,
) -> list[str]:
    """What each host's engine would refuse of its configs with that host's settings (and the
    adaptive arm's `schedule`), in the engine's own words (vLLM's SpeculativeConfig rules, naming
    where vLLM has each)."""
    refused = [
        f"{ENGINES[h.engine].role}: {name}: {c.id}: {why}"
        for name, h in hosts.items()
        for c in [*configs, *own.get(name, [])]
        for why in ENGINES[h.engine].refusals(c, {**h.settings, "adaptive_config": schedule})
    ]
    return list(dict.fromkeys(refused))


def _client_problems(traffic: dict[str, Any] | None, hosts: Mapping[str, HostInput]) -> list[str]:
    """bench_serving sends one raw prompt per record: chat workloads need specsweep's own client."""
    chats = [s["name"] for s in (traffic or {}).get("sets", []) if s["kind"] == "chat"]
    sglang = sorted(h.name for h in hosts.values() if h.client == "sglang")
    if not chats or not sglang:
        return []
    return [
        f"workloads: {', '.join(chats)} go through the chat endpoint, which benchmark_client sglang "
        f"(bench_serving) does not drive; set benchmark_client to specsweep on {', '.join(sglang)}"
    ]


def _context_tokens(hosts: Mapping[str, HostInput]) -> int | None:
    """The smallest context one request gets on a targeted host (llama.cpp's per-slot ctx_size); None
    when no host says (SGLang sizes it from the model)."""
    sizes = [
        int(h.settings["ctx_size"]) for h in hosts.values() if str(h.settings.get("ctx_size", "")).isdigit()
    ]
    return min(sizes, default=None)


def _adaptive_arm(
    request: Request, hosts: Mapping[str, HostInput]
) -> tuple[list[cfg.Config], list[str], list[str]]:
    """The `adaptive` config of each env profile, or why an engine would refuse it on these hosts, and
    what the operator should know of its schedule (from which batch size it stops speculating)."""
    given = request["adaptive_config"]
    refusals, schedules = [], {}
    able = [e.adaptive for e in ENGINES.values() if e.adaptive]
    for h in hosts.values():
        arm = ENGINES[h.engine].adaptive
        if arm is None:
            flags, labels = (
                " or ".join(dict.fromkeys(getattr(a, k) for a in able)) for k in ("flag", "label")
            )
            refusals.append(
                f"adaptive_config: {h.engine} has no adaptive speculation ({flags}); "
                f"sweep it on {labels} hosts"
            )
            continue
        refusals += arm.problems(h.settings, request["algorithm"] or None, request["topk"])
        problem, schedules[h.name] = arm.schedule(h.settings, given, h.name)
        refusals += [problem] if problem else []
    if refusals:
        return [], list(dict.fromkeys(refusals)), []
    found = {json.dumps(s, sort_keys=True): s for s in schedules.values()}
    if len(found) > 1:
        differ = f"adaptive_config: {given}: the hosts' engine releases differ in it; give a schedule file"
        return [], [differ], []
    (schedule,) = found.values() or [{}]
    engine = next(ENGINES[h.engine] for h in hosts.values())
    arm = engine.adaptive
    try:
        start = arm.start(schedule)
    except ScheduleError as exc:
        return [], [f"adaptive_config: {exc}"], []
    profiles = request["env_profiles"] or [cfg.DEFAULT_PROFILE]
    algorithm = request["algorithm"] or None
    # An engine with a draft tree runs the schedule as a chain (topk 1: SGLang's only adaptive shape).
    tree = {"topk": 1, "draft_tokens": start + 1} if {"topk", "draft_tokens"} <= engine.axes else {}
    configs = [cfg.make(start, algorithm=algorithm, env_profile=p, adaptive=True, **tree) for p in profiles]
    return configs, [], arm.notes(given, schedule, request["concurrency"])


def _search_problems(request: Request, configs: list[cfg.Config]) -> list[str]:
    """Why a step search cannot run on this grid: it varies steps alone, over at least 3 values."""
    if not request["search"] or not configs:
        return []
    problems = [
        f"{name}: search=steps varies steps only; give one {name} value, not a list"
        for name in ("topk", "draft_tokens")
        if len(request[name]) > 1
    ]
    profiles = {c.env_profile for c in configs}
    if min(sum(c.speculative and c.env_profile == p for c in configs) for p in profiles) < 3:
        problems.append("steps_range: search=steps needs at least 3 step counts, e.g. steps_range=1..10")
    return problems


def _race_problems(request: Request) -> list[str]:
    """Racing stops a config's later launches by comparing it with this host's best so far."""
    if not request["race"]:
        return []
    problems = []
    if request["launches"] < 2:
        problems.append("race: needs launches >= 2 (it stops the later launches of a config that lost)")
    if request["mode"] != "replicate" or request["search"]:
        problems.append("race: needs mode=replicate without search (each host races its own configs)")
    return problems


def document(plan: dict[str, Any]) -> dict[str, Any]:
    """plan.json: every host's exact argv and env per config, secrets redacted."""
    hosts = {}
    for name, hp in plan["hosts"].items():
        entries = [{**e, "argv": redact_argv(e["argv"]), "env": redact_env(e["env"])} for e in hp["entries"]]
        server = hp["server"] and {**hp["server"], "api_key": REDACTED if hp["server"]["api_key"] else ""}
        hosts[name] = {**hp, "server": server, "entries": entries}
    return {"schema_version": 2, "sweep": plan["sweep"], "hosts": hosts}


def describe(plan: dict[str, Any]) -> str:
    """The plan as an operator reads it: one command line per host and config."""
    sweep = plan["sweep"]
    lines = [summary(sweep)]
    lines += [f"  grid: {w}" for w in sweep["warnings"]]
    lines += [f"  WARNING: {sweep['estimate']['warning']}"] if sweep["estimate"].get("warning") else []
    lines += priors(sweep, plan["hosts"])
    for host, hp in plan["hosts"].items():
        lines.append(f"{host} ({hp['engine']}):")
        lines += [f"  PROBLEM: {p}" for p in hp["problems"]]
        for entry in hp["entries"]:
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(entry["env"].items()))
            lines.append(f"  {entry['config']['id']}: {env + ' ' if env else ''}{shlex.join(entry['argv'])}")
        if hp.get("benchmark"):
            argv = shlex.join(hp["benchmark"]["argv"])
            lines.append(f"  client: {argv} (each launch adds where it keeps its output)")
        launches = [s["name"] for s in hp.get("order", []) + hp.get("closing", [])]
        if launches != [e["config"]["id"] for e in hp["entries"] if not e["searched"]]:
            lines.append(f"  order: {', '.join(launches)}")
    return "\n".join(lines)


def summary(sweep: Mapping[str, Any]) -> str:
    """One line: the sweep, its configs, where, how long, where the results go."""
    ids = [c["id"] for c in sweep["configs"]]
    shown = ", ".join(ids) if len(ids) <= 8 else f"{', '.join(ids[:6])}, ... {ids[-1]}"
    est = sweep["estimate"]
    seed = sweep["settings"].get("order_seed")
    ordered = f"random order (order_seed={seed})" if seed is not None else "grid order"
    sets = (sweep.get("workloads") or {}).get("sets") or []
    traffic = "".join(
        f", {s['name']} {s['records']} records ({s['source']}, sha256 {s['sha256'][:12]})" for s in sets
    )
    return (
        f"sweep {sweep['id']}: {len(ids)} config(s) ({shown}) on {', '.join(sweep['hosts'])}{traffic}, "
        f"{launch_count(est)}, {est['text']}; results in {sweep['dir']}; "
        f"{ordered}"
    )


def launch_count(estimate: Mapping[str, Any]) -> str:
    """ "4 launch(es) per host", or where finalists or racing may change it "3 launch(es) per host
    (2 to 4: ...)"."""
    said = f"{estimate['launches_per_host']:g} launch(es) per host"
    least, most = estimate.get("launches_least"), estimate.get("launches_most")
    if least is None or least == most:
        return said
    why = "; ".join(est.SPAN_WORDS[by][1] for by in estimate.get("span_by", ["finalists"]))
    return f"{said} ({least} to {most}: {why}, counted {estimate.get('counted', 'at even odds')})"


def priors(sweep: Mapping[str, Any], hosts: Mapping[str, Any]) -> list[str]:
    """Per host that compares speculative configs: where finalists or racing judge one launch, the
    launch spread taken, from where, and which finalists it relaunches (analysis.running.prior);
    whether the baseline is launched again, and why."""
    settings = sweep["settings"]
    judged = (settings["finalists"] or settings["race"]) and not settings["search"]
    lines = []
    for host, hp in hosts.items():
        spec = sum(e["config"]["speculative"] for e in hp["entries"])
        if not hp.get("launch_prior") or not spec:
            continue
        p = msgspec.convert(hp["launch_prior"], LaunchPrior)
        slots = [*hp["order"], *hp["closing"]]
        rule = msgspec.convert(hp["stopping"], levelsize.LevelSizing) if hp.get("stopping") else None
        words = [
            launchprior.describe(p, spec) if judged else "",
            launchprior.again_words(
                p, settings["baseline_every"], sum(s["why"] == order.CHECK for s in slots)
            ),
            levelsize.describe(rule) if rule and rule.launch_cost_s is not None else "",
        ]
        if any(words):
            lines.append(f"  {host}: {'; '.join(w for w in words if w)}")
    return lines


def headline(sweep: Mapping[str, Any], hosts: Mapping[str, Any] | None = None) -> str:
    """The summary, the launch spread each host's finalists take, and on a line of its own the
    estimate's warning when the sweep is long."""
    warning = sweep["estimate"].get("warning")
    lines = [summary(sweep), *priors(sweep, hosts or {})]
    return "\n".join(lines) + (f"\nWARNING: {warning}" if warning else "")
