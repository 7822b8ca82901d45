"""How long a sweep will take, from what it will send and what this host's history says it costs.

A launch costs its load, the suite's own work around it (launch, wait, record: `overhead`) and its
benchmark; a benchmark is the warm-up plus, per workload, level and repeat, the requests the level
sends times the tokens each generates over the level's measured tok/s. A level that stops when its
interval is tight (bench_ci_pct) sends what the history's request-to-request spread needs, one
that measures what a launch is worth (analysis.sweep.levelsize) what that spread and the launch's
cost and spread make worth sending; either between its minimum and its budget. Rates come from the
latest earlier sweeps of the same engine and model on this controller (per workload and level where
they have it); what they lack is a stated assumption, named in the estimate's text.

A rate holds for the tokens per request it was measured at: a request costs its first token (queue
and prefill) and then a decode step per token, so an 8-token request's tok/s is mostly the first
token's wait (this machine: 4.4 tok/s at 8 tokens where the same server made 18 at 96). The history
keeps a level's first token in decode steps (TTFT over TPOT) and its tokens per request, and a rate
is taken to this sweep's max_tokens through them.

A CPU engine's speed is the CPU it gets: on a shared host a launch measured while other work held
1.5 of 2 cores ran at half the speed of one measured beside 0.7 (this machine's demo: 7 and 16
tok/s). Each history run's rate is taken back to a whole server's share (its fact's interference
sample: the cores others kept busy; the server's threads), and scaled to the share the host's load
leaves it now, where the controller can see it (the host is the controller).
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.engines import ENGINES
from analysis.metrics import tpot_s
from analysis.tquantiles import KNOTS

# Where no earlier sweep says: per engine its per-launch suite overhead (`assumed_overhead_s`) and
# decode tok/s at concurrency 1 (`assumed_tps`), scaled by c ** RATE_EXPONENT for a level of c, and
# the request-to-request tok/s spread.
ASSUMED_SETUP_S = 30.0  # the plan, preflight and install before the first launch
ASSUMED_TPS = {name: e.assumed_tps for name, e in ENGINES.items()}
RATE_EXPONENT = 0.5
MIN_SHARE = 0.1  # a share below this says more about the sample than the server
ASSUMED_CV = 0.10
SWEEPS_READ = 10  # earlier sweeps read for rates, newest first
# What moves a host's launch count once the sweep measures (analysis.sweep.plan.launches_per_host):
# each by its name in a span ("as racing goes") and what it does.
SPAN_WORDS = {
    "racing": ("racing", "a config clearly behind is raced out of its later launches"),
    "finalists": ("the finalists", "finalists launch again on a close call only"),
}
WARN_S = 3600.0  # over this, the estimate names the biggest lever


@dataclass(frozen=True)
class Level:
    """One (workload, concurrency) of a launch: how many requests per unit and tokens per request."""

    workload: str | None
    concurrency: int
    units: int  # records sent per repeat if nothing stops the level earlier
    turns: float  # requests per unit (a chat record's conversation has several)
    tokens: int  # output tokens per request


@dataclass
class History:
    """What earlier sweeps of one engine and model measured (medians; None: never measured)."""

    load_s: float | None = None
    overhead_s: float | None = None  # per launch, beyond load and benchmark
    setup_s: float | None = None  # from the run's start to its first launch
    tps: dict[tuple[str | None, int], float] = field(default_factory=dict)  # window tok/s by level
    cv: dict[tuple[str | None, int], float] = field(default_factory=dict)  # per-request tok/s spread
    # The request shape the rates were measured at: output tokens per request, and the first token's
    # time in decode steps (TTFT / TPOT).
    tokens: dict[tuple[str | None, int], float] = field(default_factory=dict)
    first_steps: dict[tuple[str | None, int], float] = field(default_factory=dict)
    free: float | None = None  # CPU engines: median cores the server had, up to its threads' need
    need: float = 1.0  # and its threads

    @property
    def launch_s(self) -> float | None:
        """What one more launch costs but its benchmark: its load and the suite's work around it."""
        return None if self.load_s is None else self.load_s + (self.overhead_s or 0.0)


def t975(df: float) -> float:
    """The t distribution's 0.975 quantile, interpolated in 1/df over the shared table."""
    inv = 1.0 / max(df, 1.0)
    for (x0, y0), (x1, y1) in itertools.pairwise(KNOTS):
        if x0 <= inv <= x1:
            return y0 + (y1 - y0) * (inv - x0) / (x1 - x0)
    return KNOTS[-1][1]


def requests_to_settle(cv: float, ci_pct: float) -> int:
    """Requests whose mean tok/s has a 95% CI half-width of at most ci_pct % when they spread by `cv`."""
    n = 2
    while n < 10_000 and t975(n - 1) * cv / math.sqrt(n) > ci_pct / 100:
        n += 1
    return n


def worth_sending(launch_cost_s: float, unit_s: float, request_cv: float, launch_cv_pct: float) -> float:
    """Units a level is worth in one launch, all its repeats together (Kalibera and Jones's optimum:
    analysis.sweep.levelsize), as the client applies it per repeat (specsweep_bench.py
    worth_sending): sqrt(launch cost / unit cost) x request CV / launch CV."""
    return math.sqrt(launch_cost_s / unit_s) * request_cv / (launch_cv_pct / 100.0)


def _facts(sweep_dir: Path) -> Iterator[dict[str, Any]]:
    """The ok facts of one sweep folder, as parsed JSON (history is best effort: bad files are skipped)."""
    for path in sweep_dir.glob("*/*.json"):
        try:
            fact = json.loads(path.read_bytes())
        except (OSError, ValueError):
            continue
        if isinstance(fact, dict) and fact.get("status") == "ok":
            yield fact


def cpu_share(free: float, need: float) -> float:
    """The share of its full speed a CPU server with `need` threads runs at with `free` cores."""
    return min(1.0, max(free / need, MIN_SHARE))


def free_cores(load: float, cpus: int, need: float) -> float:
    """The cores a server of `need` busy threads gets beside `load` runnable others, as a fair
    scheduler shares `cpus` between them."""
    return min(need, cpus * need / (load + need))


def _threads(fact: Mapping[str, Any]) -> float:
    """The llama.cpp server's threads (-t / --threads, else LLAMA_ARG_THREADS, else 1)."""
    launch = fact.get("launch") or {}
    argv = [str(a) for a in launch.get("argv") or []]
    for flag in ("-t", "--threads"):
        if flag in argv[:-1]:
            return float(argv[argv.index(flag) + 1])
    return float((launch.get("env") or {}).get("LLAMA_ARG_THREADS") or 1)


def _free(fact: Mapping[str, Any], run: Mapping[str, Any]) -> float | None:
    """The cores the server had during `run`: the host's CPUs less those others kept busy."""
    others = (run.get("interference") or {}).get("cpu_other_cores")
    cpus = (fact.get("host_facts") or {}).get("cpu_count")
    if not isinstance(others, int | float) or not isinstance(cpus, int) or cpus < 1:
        return None
    return max(cpus - others, 0.0)


def history(results_dir: Path, engine: str, model: str | None) -> History:
    """The newest earlier sweeps' rates of `engine` serving `model` (any model when it has none)."""
    sweeps = sorted(results_dir.glob("*/sweep.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    # The newest that measured something: a plan-only run's folder has no fact and takes no place.
    sweeps = [s for s in sweeps if any(s.parent.glob("*/*.json"))][:SWEEPS_READ]
    out = History()
    for match_model in ([model] if model else []) + [None]:
        for sweep in sweeps:
            facts = [
                f for f in _facts(sweep.parent)
                if (f.get("engine") or {}).get("name") == engine
                and (match_model is None or f["engine"].get("model") == match_model)
            ]  # fmt: skip
            _take(out, facts, _run_started_at(sweep), ENGINES[engine].cpu_bound)
        if out.load_s is not None:
            break  # the model's own history; another model's only where it has none
    return out


def _run_started_at(sweep_json: Path) -> float | None:
    """When the sweep's last run began (sweep.json), None when it does not say."""
    try:
        started = json.loads(sweep_json.read_bytes()).get("run_started_at")
    except (OSError, ValueError, AttributeError):
        return None
    return started if isinstance(started, int | float) else None


def _take(out: History, facts: Sequence[dict[str, Any]], run_started_at: float | None, cpu: bool) -> None:
    """Fill what `out` lacks from one sweep's facts (newer sweeps were taken first); `cpu`: rates
    of a CPU engine, taken back to a whole server's share of the CPU where the run says its share."""
    keys = ("started_at", "load_s", "bench_s")
    timed = sorted(
        ((f.get("host"), f["timings"]) for f in facts
         if all(isinstance((f.get("timings") or {}).get(k), int | float) for k in keys)),
        key=lambda ht: (str(ht[0]), ht[1]["started_at"]),
    )  # fmt: skip
    this_run = run_started_at if run_started_at is not None else math.inf
    # A launch's whole cost is the time to the next launch's start on its host: what is not load or
    # benchmark there is the suite's (stop, record, launch).
    extra = [
        b["started_at"] - a["started_at"] - a["load_s"] - a["bench_s"]
        for (ha, a), (hb, b) in itertools.pairwise(timed)
        if ha == hb and a["started_at"] >= this_run
    ]
    if out.load_s is None and timed:
        out.load_s = statistics.median(t["load_s"] for _, t in timed)
    if out.overhead_s is None and extra:
        out.overhead_s = max(0.0, statistics.median(extra))
    starts = [
        t["started_at"] for _, t in timed if run_started_at is not None and t["started_at"] >= run_started_at
    ]
    if out.setup_s is None and starts and run_started_at is not None:
        out.setup_s = min(starts) - run_started_at
    tps: dict[tuple[str | None, int], list[float]] = {}
    spread: dict[tuple[str | None, int], list[float]] = {}
    shape: dict[tuple[str | None, int], list[tuple[float, float]]] = {}
    shares: list[float] = []
    for fact in facts:
        need = _threads(fact)
        for run in fact.get("runs") or []:
            key = (run.get("workload"), int(run["concurrency"]))
            free = _free(fact, run) if cpu else None
            share = 1.0 if free is None else cpu_share(free, need)
            shares += [] if free is None else [min(free, need)]
            if run.get("window_output_tokens") and run.get("duration_s"):
                tps.setdefault(key, []).append(run["window_output_tokens"] / run["duration_s"] / share)
            rates = [
                r["output_tokens"] / r["e2e_s"] for r in run.get("requests") or []
                if not r.get("error") and r.get("e2e_s")
            ]  # fmt: skip
            if len(rates) >= 2 and statistics.mean(rates) > 0:
                spread.setdefault(key, []).append(statistics.stdev(rates) / statistics.mean(rates))
            shape.setdefault(key, []).extend(_request_shape(run))
    if out.free is None and shares and not out.tps:
        out.free = statistics.median(shares)
        out.need = statistics.median(_threads(f) for f in facts)
    for key, values in tps.items():
        out.tps.setdefault(key, statistics.median(values))
    for key, values in spread.items():
        out.cv.setdefault(key, statistics.median(values))
    for key, pairs in shape.items():
        if pairs and key not in out.tokens:
            out.tokens[key] = statistics.median(t for t, _ in pairs)
            out.first_steps[key] = statistics.median(f for _, f in pairs)


def _request_shape(run: Mapping[str, Any]) -> list[tuple[float, float]]:
    """(output tokens, TTFT in decode steps) of each good request of `run` that decoded."""
    out = []
    for r in run.get("requests") or []:
        tokens, ttft, e2e = r.get("output_tokens"), r.get("ttft_s"), r.get("e2e_s")
        if r.get("error") or not all(isinstance(v, int | float) for v in (tokens, ttft, e2e)):
            continue
        per_token = tpot_s(tokens, ttft, e2e)
        if per_token and per_token > 0 and ttft >= 0:
            out.append((float(tokens), ttft / per_token))
    return out


Key = tuple[str | None, int]


def lookup(table: Mapping[Key, float], workload: str | None, c: int) -> tuple[float, int, str | None] | None:
    """The history's figure for level (workload, c), else the other workloads' at c, else the nearest
    level's: (figure, the level it is of, what was assumed or None); None when the history has none."""
    if (workload, c) in table:
        return table[(workload, c)], c, None
    same_c = [v for (_, level), v in table.items() if level == c]
    if same_c:
        return statistics.median(same_c), c, f"{workload} at c={c} as the other workloads"
    if not table:
        return None
    (_, near), value = min(table.items(), key=lambda kv: abs(math.log(kv[0][1] / c)))
    return value, near, f"c={c} from c={near}"


def level_rate(
    h: History, engine: str, workload: str | None, c: int, tokens: int | None = None
) -> tuple[float, str | None]:
    """tok/s at level (workload, c) for `tokens` per request, and the assumption made when the history
    lacks it (None: measured). Another level's rate is scaled by (c ratio) ** RATE_EXPONENT; a rate
    measured at other tokens per request by per_request_rate's ratio."""
    found = lookup(h.tps, workload, c)
    if found is None:
        base = ASSUMED_TPS.get(engine, min(ASSUMED_TPS.values()))
        return base * c**RATE_EXPONENT, f"{base:.0f} tok/s at c=1"
    value, level, why = found
    value *= (c / level) ** RATE_EXPONENT
    seen, first = lookup(h.tokens, workload, c), lookup(h.first_steps, workload, c)
    if tokens is None or seen is None or first is None or round(seen[0]) == tokens:
        return value, why
    value *= per_request_rate(tokens, first[0]) / per_request_rate(seen[0], first[0])
    said = f"{tokens} tokens a request from history's {seen[0]:.0f}"
    return value, f"{why}; {said}" if why else said


def per_request_rate(tokens: float, first_steps: float) -> float:
    """A request's tok/s in decode steps: `tokens` over the first token's wait (`first_steps` decode
    steps) and a step for each later token."""
    return tokens / (first_steps + max(tokens - 1.0, 0.0))


@dataclass(frozen=True)
class Measure:
    """How each level is driven (the request's bench_* settings, max_tokens, repeats, warm-up)."""

    repeats: int
    warmup: int
    requests: int | None  # bench_requests: exactly this many units
    duration_s: float | None  # bench_duration_s: this long
    ci_pct: float | None  # stop when the tok/s interval is this tight (0: send the count)
    min_requests: int
    budget_s: float | None  # a level stops sending after this long, its repeats sharing it
    rate: float | None = None  # request_rate: units arrive this many per second (open loop)
    # Instead of ci_pct, send what a launch is worth (analysis.sweep.levelsize): its cost and spread.
    launch_cost_s: float | None = None
    launch_cv_pct: float | None = None

    @property
    def stops(self) -> bool:
        """Whether a level stops before its count: neither a count nor a duration given, and a rule."""
        ruled = self.launch_cost_s is not None or bool(self.ci_pct)
        return self.requests is None and self.duration_s is None and ruled

    def units(self, level: Level, per_unit: float, cv: float) -> int:
        """The units one repeat of `level` sends before its rule says enough (its budget aside): the
        interval's, or what a launch is worth (its repeats share those); at least the minimum."""
        if self.launch_cost_s is not None and self.launch_cv_pct:
            worth = worth_sending(self.launch_cost_s, per_unit, cv, self.launch_cv_pct) / self.repeats
            needed = max(3, math.ceil(worth))
        else:
            needed = requests_to_settle(cv, self.ci_pct or 0.0)
        floor = max(self.min_requests, 2 * level.concurrency)
        return min(level.units, max(floor, needed + level.concurrency - 1))


def level_seconds(level: Level, m: Measure, tps: float, cv: float) -> float:
    """Seconds one repeat of one level takes: its units x requests x tokens over its tok/s."""
    per_unit = level.turns * level.tokens / tps
    if m.duration_s is not None:
        return m.duration_s + per_unit * level.concurrency  # the drain after the last send
    units = m.requests if m.requests is not None else level.units
    if m.stops:
        units = m.units(level, per_unit, cv)
    # Open loop: the arrivals set the pace unless the server is slower than they are.
    seconds = max(units * per_unit, units / m.rate if m.rate else 0.0)
    if m.stops and m.budget_s is not None:
        seconds = min(seconds, m.budget_s / m.repeats + per_unit * level.concurrency)
    return seconds


@dataclass(frozen=True)
class Parts:
    """An estimate's parts, seconds per host."""

    launches: float  # expected: finalists and racing at their odds
    setup_s: float
    load_s: float
    overhead_s: float
    bench_s: float  # one launch's benchmark
    assumptions: tuple[str, ...]
    cpu_free: float | None = None  # a CPU engine's cores the estimate gave the server, where seen
    # Of `launches`, the expected close calls' relaunches, and what one benchmarks: its level only
    # (a finalist's relaunch measures its close calls; the mean level's, warm-up included).
    close_call: float = 0.0
    close_bench_s: float = 0.0

    @property
    def total_s(self) -> float:
        """The whole sweep on one host."""
        return self.total_at(self.launches, self.close_call)

    def total_at(self, launches: float, close_call: float = 0.0) -> float:
        """The sweep on one host had it made `launches` launches (the span of its finalists),
        `close_call` of them a close call's relaunch of one level."""
        every = launches * (self.load_s + self.overhead_s + self.bench_s)
        return self.setup_s + every - close_call * (self.bench_s - self.close_bench_s)


def parts(
    h: History,
    engine: str,
    levels: Sequence[Level],
    m: Measure,
    launches: float,
    health_timeout_s: float,
    cpu_now: tuple[float, float] | None = None,
    close_call: float = 0.0,
) -> Parts:
    """The estimate's parts for `launches` launches of `levels` on a host with history `h`, of them
    `close_call` a close call's relaunch of one level; `cpu_now`: a CPU engine's (free cores now,
    threads), where the host's load can be seen."""
    assumed: list[str] = []
    bench = 0.0
    share = 1.0
    if cpu_now is not None and ENGINES[engine].cpu_bound:
        share = cpu_share(*cpu_now)
        had = f"; history's runs had {h.free:.2f}" if h.free is not None else ""
        assumed.append(f"the server gets {cpu_now[0]:.2f} of its {cpu_now[1]:g} core(s) now{had}")
    elif h.free is not None and ENGINES[engine].cpu_bound:
        share = cpu_share(h.free, h.need)  # load unseen: the share history's runs had
    for level in levels:
        tps, why = level_rate(h, engine, level.workload, level.concurrency, level.tokens)
        tps *= share
        assumed += [why] if why else []
        found = lookup(h.cv, level.workload, level.concurrency)
        cv, _, why = found if found else (ASSUMED_CV, 0, f"request tok/s spread {ASSUMED_CV:.0%}")
        if m.stops:
            assumed += [why] if why else []
        bench += m.repeats * level_seconds(level, m, tps, cv)
    warmup = 0.0
    if levels and m.warmup:
        first = levels[0]
        tps, _ = level_rate(h, engine, first.workload, 1, first.tokens)
        warmup = m.warmup * first.turns * first.tokens / (tps * share)
    load = h.load_s
    guess = ENGINES[engine].assumed_load_s
    if load is None and guess is not None and guess < health_timeout_s:
        load = guess
        assumed.append(f"load {guess:.0f} s")
    elif load is None:
        load = health_timeout_s
        assumed.append(f"load up to the health timeout, {health_timeout_s:.0f} s")
    overhead = h.overhead_s
    if overhead is None:
        overhead = ENGINES[engine].assumed_overhead_s
        assumed.append(f"{overhead:.0f} s suite overhead per launch")
    setup = h.setup_s
    if setup is None:
        setup = ASSUMED_SETUP_S
        assumed.append(f"{ASSUMED_SETUP_S:.0f} s before the first launch")
    free = cpu_now[0] if cpu_now is not None and ENGINES[engine].cpu_bound else None
    one_level = bench / max(len(levels), 1) + warmup
    return Parts(launches, setup, load, overhead, bench + warmup, tuple(dict.fromkeys(assumed)), free,
                 close_call, one_level)  # fmt: skip


def lever(p: Parts, m: Measure) -> str:
    """The change that saves the most of a long sweep, in words."""
    if p.launches * p.load_s >= p.launches * p.bench_s:
        return (
            f"loading is {p.launches * p.load_s / p.total_s:.0%} of it: fewer launches "
            "(fewer steps, race=true, finalists=false)"
        )
    if m.requests is not None or m.duration_s is not None:
        return "the benchmark dominates: drop bench_requests/bench_duration_s so levels stop when settled"
    if not m.stops:
        return "the benchmark dominates: drop bench_ci_pct=0 so levels stop when settled"
    return "the benchmark dominates: fewer repeats, levels or workloads, or a larger bench_ci_pct"


def span_as(span_by: Sequence[str]) -> str:
    """ "as the finalists go", "as racing goes", "as racing and the finalists go"."""
    names = [SPAN_WORDS[by][0] for by in span_by]
    return f"as {' and '.join(names)} {'goes' if names == ['racing'] else 'go'}"


def versus(sweep: Mapping[str, Any], root: Path, now: float) -> str:
    """The end-of-sweep line: the plan's estimate against what this run took, and its launches' medians."""
    planned = sweep.get("estimate") or {}
    took = now - float(sweep["run_started_at"])
    if planned.get("seconds") is None:
        return ""
    # Each launch's timings, and whether it measured some levels only (a close call's relaunch).
    timings = [
        (f["timings"], bool((f.get("benchmark") or {}).get("only"))) for f in _facts(root)
        if (f.get("timings") or {}).get("started_at", 0) >= sweep["run_started_at"]
        and f["timings"].get("load_s") is not None and f["timings"].get("bench_s") is not None
    ]  # fmt: skip
    medians = ""
    if timings and planned.get("load_s") is not None:
        load = statistics.median(t["load_s"] for t, _ in timings)
        medians = f"; per launch load {load:.0f} s (estimated {planned['load_s']:.0f})"
        whole = [t["bench_s"] for t, some in timings if not some]
        some = [t["bench_s"] for t, some in timings if some]
        if whole:
            medians += f", benchmark {statistics.median(whole):.0f} s (estimated {planned['bench_s']:.0f})"
        if some and planned.get("close_bench_s") is not None:
            medians += (
                f", a close call's relaunch {statistics.median(some):.0f} s of benchmark (estimated "
                f"{planned['close_bench_s']:.0f})"
            )
    had = [
        min(free, _threads(f)) for f in _facts(root)
        if (f.get("timings") or {}).get("started_at", 0) >= sweep["run_started_at"]
        for r in f.get("runs") or [] if (free := _free(f, r)) is not None
    ]  # fmt: skip
    if had and planned.get("cpu_free") is not None:
        # Where the load moved, the CPU engine's benchmark moved with it (the estimate's biggest unknown).
        free = statistics.median(had)
        medians += f"; the server had {free:.2f} core(s) (estimated {planned['cpu_free']:.2f})"
    off = took / planned["seconds"] - 1
    least, most = planned.get("seconds_least"), planned.get("seconds_most")
    shown = least is not None and least != most
    span = f" ({least:.0f} to {most:.0f} s {span_as(planned.get('span_by', ['finalists']))})" if shown else ""
    return f"estimate {planned['seconds']:.0f} s{span}, took {took:.0f} s ({off:+.0%}){medians}"
