"""What each host is handed: its server, its launches and the order it runs them in; and the sweep.

analysis.sweep.plan builds these structs; `dump` gives what Ansible gets (`specsweep_host`, one
entry as `specsweep_entry`, one slot as `specsweep_slot`) and what plan.json holds, checked on the
way out. Every Python reader (the action plugins, the lease, the fact writer, deploy) takes its part
back through `load` (plan.json through `load_document`), so a missing, misspelt or mistyped field
is an error that names it. The playbooks read only fields defined here (tests/unit/test_plan_fields.py).
The sweep's settings are a struct made from analysis.sweep.request.SETTINGS: a field per setting,
of the type its parser returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar

import msgspec

from analysis.engines import NAMES
from analysis.sweep.client import CLIENTS
from analysis.sweep.config import Config
from analysis.sweep.launchprior import LaunchPrior
from analysis.sweep.levelsize import LevelSizing
from analysis.sweep.order import CHECK, FINALIST, GRID
from analysis.sweep.request import SETTINGS

EngineName = Literal[NAMES]
Why = Literal[GRID, CHECK, FINALIST]

T = TypeVar("T")


class PlanError(ValueError):
    """A host plan (or a part of one) that does not match these structs; the message says where."""


class _Part(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Every part of a host plan: immutable, strict about its keys, no bool for a number."""


class Server(_Part, kw_only=True):
    """Where the launched server listens and how long it may take to answer (analysis.engines)."""

    engine: EngineName
    version: str | None  # the role's pinned version; None: the host reports it in preflight
    model: str  # the model path the server loads
    host: str  # the address it listens on
    port: int
    url: str  # http://host:port, what the health wait and the client call
    health_timeout_s: float  # seconds the server may take to answer /health
    api_key: str  # "" without one; plan.json holds it redacted
    python: str | None  # the engine's own Python (SGLang's: bench_serving runs there); None: llama.cpp


class Benchmark(_Part, kw_only=True):
    """The benchmark client as this host runs it at every launch (analysis.sweep.client.host_argv)."""

    client: Literal[CLIENTS]  # benchmark_client: specsweep's own, or SGLang's bench_serving
    # The exact argv, list for list, but where a launch keeps its output: the benchmark role adds
    # --output (and bench_serving's --jsonl) next to that launch's server log.
    argv: list[str]


class Entry(_Part, kw_only=True):
    """One config as this host launches it: the exact argv (never shell-joined) and env."""

    config: Config
    argv: list[str]
    env: dict[str, str]
    searched: bool  # a step search chooses it, one probe at a time (not in the order)


class Slot(_Part, kw_only=True):
    """One launch in a host's order: which config, which launch of it, and why it is there."""

    id: str  # the config id
    launch: int  # 1-based; launch k >= 2 has its own fact, <id>.launch<k>.json
    name: str  # the fact's stem (analysis.sweep.order.fact_name)
    why: Why
    speculative: bool
    entry: int  # the index of its Entry in the host's entries
    # The levels it measures, as the client's --only names them; empty: every level (a finalist's
    # relaunch measures only its close calls: analysis.running.prior.finalist_levels).
    levels: list[str] = msgspec.field(default_factory=list)


class AdaptiveCopy(_Part, kw_only=True):
    """The adaptive arm's schedule, copied to the host in preflight where its argv names it."""

    src: str  # on the controller
    dest: str  # on the host


class HostPlan(_Part, kw_only=True):
    """Everything one host needs for the sweep, computed on the controller before any host is touched."""

    engine: EngineName
    role: str  # the engine's role, included in preflight
    server: Server | None  # None when the host's settings did not render: `problems` says why
    benchmark: Benchmark | None  # None with no server
    entries: list[Entry]
    order: list[Slot]  # the launches of the grid, in this host's seeded order
    closing: list[Slot]  # the baseline once more, after everything else
    problems: list[str]  # what the controller sees stops this host; preflight adds the host's own
    follows: str | None  # multi-node: the rank-0 host this one runs its part beside
    followed_by: list[str]  # the hosts that follow this one
    run_dir: str  # the host's folder for server logs, pidfiles and kept facts
    lock_path: str  # the host's sweep lock
    # This run's own folder for the benchmark client and the records it sends (<benchmark_work_dir>/
    # <run_id>): installed in preflight, removed when the run gives the host back. "" in older plans.
    client_dir: str = ""
    adaptive_config: AdaptiveCopy | None
    # The launch spread its one-launch verdicts and finalists take (analysis.running.prior); every
    # fact of this host records it. None in older plans (the assumed spread).
    launch_prior: LaunchPrior | None = None
    # How its levels stop (analysis.sweep.levelsize: an interval, or what a launch is worth); None
    # in older plans and where the server did not render.
    stopping: LevelSizing | None = None
    # Checkpoint files or folders read into the page cache during each benchmark (-e prefetch;
    # analysis.sweep.prefetch), for the launch after it; empty: none.
    prefetch: list[str] = msgspec.field(default_factory=list)


# Every setting of the request, typed (analysis.sweep.request reads and checks them; plan.json and
# sweep.json hold them as `sweep.settings`, the playbooks as `specsweep_settings`).
Settings = msgspec.defstruct(
    "Settings", [(s.name, s.type) for s in SETTINGS], bases=(_Part,), kw_only=True, module=__name__
)


class Estimate(_Part, kw_only=True):
    """How long the sweep takes (analysis.sweep.plan.estimate)."""

    configs: int
    # Launches a host makes as the estimate counts them (a close call's finalists and racing's
    # later launches at their odds: `counted`, to a tenth), and their least and most
    # (analysis.sweep.plan.launches_per_host); None in older plans.
    launches_per_host: float
    launches_least: int | None = None
    launches_most: int | None = None
    seconds: float | None  # None: no earlier sweep of this engine to time
    # The whole sweep at the least and the most launches; None in older plans.
    seconds_least: float | None = None
    seconds_most: float | None = None
    # What may change the count (analysis.sweep.estimate.SPAN_WORDS): "racing", "finalists"; older
    # plans had the finalists' span only.
    span_by: list[Literal["racing", "finalists"]] = msgspec.field(default_factory=lambda: ["finalists"])
    counted: str = "at even odds"  # the odds the count takes them at (analysis.sweep.launchprior.odds)
    # Its parts, per launch but setup (analysis.sweep.estimate.Parts); None in older plans.
    setup_s: float | None = None
    load_s: float | None = None
    overhead_s: float | None = None
    bench_s: float | None = None
    # Of launches_per_host, the expected close calls' relaunches, and the one level each benchmarks.
    close_call: float = 0
    close_bench_s: float | None = None
    cpu_free: float | None = None  # a CPU engine's cores the estimate gave the server (its load seen)
    assumptions: list[str] = msgspec.field(default_factory=list)  # what history did not give
    warning: str | None = None  # over an hour: the biggest lever
    text: str  # as the operator reads it


class Workloads(_Part, kw_only=True):
    """The traffic the sweep sends (analysis.workloads.build): one records file for every host."""

    records: str  # the records file, on the controller (copied to each host in preflight)
    sets: list[dict[str, Any]]  # each workload by name, source, counts and hash (never its text)


class Sweep(_Part, kw_only=True):
    """The sweep, as sweep.json and plan.json hold it: its names, settings, configs and estimate."""

    id: str
    dir: str  # the results folder, on the controller
    run_id: str  # this invocation (locks, claims)
    run_started_at: float  # epoch seconds: facts written since belong to this run
    git_rev: str | None
    repo: str  # the suite's checkout on the controller
    hosts: list[str]  # the targeted hosts
    settings: Settings
    configs: list[Config]  # the grid
    warnings: list[str]  # grid cells dropped, and why
    workloads: Workloads | None  # None: the role's prompt set
    estimate: Estimate


class Document(_Part, kw_only=True):
    """plan.json: the sweep (as sweep.json holds it) and every host's plan, secrets redacted."""

    schema_version: Literal[2]
    sweep: Sweep
    hosts: dict[str, HostPlan]


def _untagged(value: Any) -> Any:
    """Ansible's own subclasses of str, int and float (its tagged values) as the plain types, which
    msgspec takes where it refuses the subclasses."""
    for plain in (str, float, int):
        if isinstance(value, plain):
            return plain(value)
    raise TypeError(f"{type(value).__name__} is not a JSON type")


def _plain(value: Any) -> Any:
    """Ansible's values as plain JSON types, read through its containers' own methods: its lazy
    dicts and lists template an item when it is read, which msgspec's C-level walk would skip."""
    if isinstance(value, Mapping):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value if value is None or isinstance(value, bool) else _untagged(value)


def load(tp: type[T], data: Any) -> T:
    """A host plan, or any part of one, from what Ansible or JSON hands over; PlanError names the field."""
    try:
        return msgspec.convert(_plain(data), tp)
    except (msgspec.ValidationError, TypeError) as exc:  # TypeError: not JSON at all
        raise PlanError(f"not a valid {tp.__name__}: {exc}") from None


def dump(part: msgspec.Struct) -> dict[str, Any]:
    """A host plan (or a part) as plain JSON types, checked against its struct on the way out."""
    out = msgspec.to_builtins(part, enc_hook=_untagged)
    load(type(part), out)  # a constructor does not check types: a wrong one fails here, not on a host
    return out


def load_document(data: Any) -> Document:
    """plan.json, including one written before a field below was added (same schema_version 2):
    order and closing (2026-12-02), server.python (2026-12-04), a server that did not render as
    {"engine": ...} rather than null, benchmark and a sweep setting added since (2026-12-05)."""
    if not isinstance(data, dict) or not isinstance(data.get("hosts"), dict):
        raise PlanError("not a valid Document: expected an object with `hosts`")
    sweep = data.get("sweep")
    if isinstance(sweep, dict) and isinstance(sweep.get("settings"), dict):
        # A setting added since the sweep ran was its default then.
        sweep = {**sweep, "settings": {**{s.name: s.default for s in SETTINGS}, **sweep["settings"]}}
    hosts = {}
    for name, host in data["hosts"].items():
        if isinstance(host, dict):
            host = {"order": [], "closing": [], "benchmark": None, **host}
            server = host.get("server")
            if isinstance(server, dict):
                host["server"] = {"python": None, **server} if len(server) > 1 else None
        hosts[name] = host
    return load(Document, {**data, "sweep": sweep, "hosts": hosts})


def of(plan: Any, host: str) -> HostPlan:
    """One host's plan out of the registered plan (the specsweep_plan action's result, or plan.json)."""
    return load(HostPlan, plan["hosts"][host])
