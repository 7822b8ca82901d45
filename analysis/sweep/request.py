"""The sweep request: every setting typed after `-e`, its default, how it is read and checked.

Values arrive as YAML types (`-e @file`, `-e '{"steps": [1, 2]}'`) or as strings (`-e steps=1,2`);
each parser takes both and names the setting in its error. Nothing reaches a host until `read`
returns no errors. The grid's axes (steps, topk, draft_tokens, algorithm) are read here and
combined by analysis.sweep.config.grid.
"""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from analysis import objectives
from analysis.engines import NAMES
from analysis.engines.base import BUILTIN_SCHEDULE
from analysis.sweep import mix
from analysis.sweep.config import AXES, NAME_RE, parse_id
from analysis.workloads import traffic
from analysis.workloads.shipped import SHIPPED

_INT = re.compile(r"^[+-]?\d+$")
_RANGE = re.compile(r"^(\d+)\.\.(\d+)$")


class RequestError(ValueError):
    """One problem with the request, phrased for the operator: '<setting>: <sentence>'."""


def int_list(name: str, value: Any, minimum: int = 1) -> list[int]:
    """2, [1, 2], "1,2,4", "[1,2,4]" or "1..10" as sorted distinct integers; [] for empty."""
    if value is None or value == "" or value == []:
        return []
    if isinstance(value, bool):
        raise RequestError(f"{name}: expected whole numbers, got {value!r}")
    if isinstance(value, int):
        items: list[Any] = [value]
    elif isinstance(value, list | tuple):
        items = list(value)
    elif isinstance(value, str):
        text = value.strip().removeprefix("[").removesuffix("]").strip()
        span = _RANGE.match(text)
        if span:
            lo, hi = int(span[1]), int(span[2])
            if lo > hi:
                raise RequestError(f"{name}: range {value!r} is empty (write low..high)")
            items = list(range(lo, hi + 1))
        else:
            items = [t.strip() for t in text.split(",")]
    else:
        raise RequestError(f"{name}: expected whole numbers, got {value!r}")
    out = []
    for item in items:
        if isinstance(item, bool) or not (
            isinstance(item, int) or (isinstance(item, str) and _INT.match(item))
        ):
            raise RequestError(f"{name}: {item!r} is not a whole number (got {value!r})")
        number = int(item)
        if number < minimum:
            raise RequestError(f"{name}: {number} is below the minimum of {minimum}")
        out.append(number)
    return sorted(set(out))


def bool_list(name: str, value: Any) -> list[bool]:
    """true / false / "true,false" / [true, false]: distinct booleans, false first; [] for empty."""
    if value is None or value == "" or value == []:
        return []
    if isinstance(value, str):
        items: list[Any] = [t.strip() for t in value.strip().removeprefix("[").removesuffix("]").split(",")]
    else:
        items = list(value) if isinstance(value, list | tuple) else [value]
    return sorted({boolean(name, item) for item in items})


def one_int(name: str, value: Any, minimum: int = 1) -> int:
    """Exactly one whole number (a list or a range is an error, not silently its smallest item)."""
    numbers = int_list(name, value, minimum)
    if len(numbers) != 1:
        raise RequestError(f"{name}: expected one whole number >= {minimum}, got {value!r}")
    return numbers[0]


def optional_int(name: str, value: Any, minimum: int = 0) -> int | None:
    """One whole number >= minimum, or None when not given."""
    return None if value is None or value == "" else one_int(name, value, minimum)


def some_ints(name: str, value: Any) -> list[int]:
    """One or more whole numbers >= 1."""
    numbers = int_list(name, value)
    if not numbers:
        raise RequestError(f"{name}: expected one or more whole numbers, got {value!r}")
    return numbers


def boolean(name: str, value: Any) -> bool:
    """A boolean as YAML or a `-e key=value` string spells it."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise RequestError(f"{name}: expected true or false, got {value!r}")


def optional_bool(name: str, value: Any) -> bool | None:
    """A boolean, or None when not given (the plan decides)."""
    return None if value is None or value == "" else boolean(name, value)


def names(name: str, value: Any) -> list[str]:
    """File-safe names as a list or "a,b" / "[a,b]", in order, each once."""
    if value is None or value == "" or value == []:
        return []
    if isinstance(value, str):
        items = [t.strip().strip("'\"") for t in value.strip().removeprefix("[").removesuffix("]").split(",")]
    elif isinstance(value, list | tuple):
        items = [str(v) for v in value]
    else:
        raise RequestError(f"{name}: expected a list of names, got {value!r}")
    bad = [i for i in items if not NAME_RE.match(i)]
    if bad:
        raise RequestError(f"{name}: {bad[0]!r} is not a name (letters, digits, '.', '_', '-')")
    return list(dict.fromkeys(items))


def one_name(name: str, value: Any) -> str:
    """One file-safe name, or '' when not given."""
    text = "" if value is None else str(value)
    if text and not NAME_RE.match(text):
        raise RequestError(f"{name}: {text!r} may use letters, digits, '.', '_' and '-' only")
    return text


def choice(*allowed: str) -> Callable[[str, Any], str]:
    """A parser for one of a few words ('' and None read as the first)."""

    def parse(name: str, value: Any) -> str:
        text = allowed[0] if value in (None, "") else value
        if text not in allowed:
            raise RequestError(f"{name}: {value!r} is not one of: {', '.join(repr(a) for a in allowed)}")
        return text

    return parse


def workload_names(name: str, value: Any) -> list[str]:
    """Shipped workloads by name, in order, each once."""
    out = names(name, value)
    bad = [n for n in out if n not in SHIPPED]
    if bad:
        raise RequestError(
            f"{name}: {bad[0]!r} is not one of: {', '.join(SHIPPED)} (your own traffic: workload_file)"
        )
    return out


def mix_shares(name: str, value: Any) -> dict[str, float]:
    """'chat=0.7,code=0.3' or {chat: 0.7, code: 0.3}: shares of requests summing to 1; {} for none."""
    if value is None or value == "" or value == {}:
        return {}
    given = ",".join(f"{k}={v}" for k, v in value.items()) if isinstance(value, Mapping) else str(value)
    try:
        return mix.parse(given, name, zero=False)
    except mix.MixError as exc:
        raise RequestError(str(exc)) from exc


def host_config_ids(name: str, value: Any) -> dict[str, list[str]]:
    """{host: config id or ids}: each a static config's id (analysis.sweep.config), in order, each once."""
    if value in (None, "", {}):
        return {}
    if not isinstance(value, Mapping):
        raise RequestError(f"{name}: expected a mapping of host to config ids, got {value!r}")
    out: dict[str, list[str]] = {}
    for host, ids in value.items():
        listed = [ids] if isinstance(ids, str) else ids
        if not isinstance(listed, list | tuple) or not all(isinstance(i, str) for i in listed):
            raise RequestError(f"{name}: {host}: expected a config id or a list of them, got {ids!r}")
        for config_id in listed:
            try:
                adaptive = parse_id(config_id)["adaptive"]
            except ValueError as exc:
                raise RequestError(f"{name}: {host}: {exc}") from None
            if adaptive:
                raise RequestError(f"{name}: {host}: {config_id} is the adaptive arm, not a static config")
        out[str(host)] = list(dict.fromkeys(listed))
    return out


def text(name: str, value: Any) -> str:
    """A plain string without newline or NUL ('' when not given)."""
    out = "" if value is None else str(value).strip()
    if "\n" in out or "\0" in out:
        raise RequestError(f"{name}: must not contain a newline or NUL")
    return out


def positive_number(name: str, value: Any) -> float | None:
    """A number > 0, or None when not given."""
    if value is None or value == "":
        return None
    try:
        number = float(value) if not isinstance(value, bool) else float("nan")
    except (TypeError, ValueError):
        number = float("nan")
    if not number > 0:
        raise RequestError(f"{name}: expected a number > 0, got {value!r}")
    return number


def optional_non_negative(name: str, value: Any) -> float | None:
    """A number >= 0, or None when not given (the plan chooses)."""
    return None if value is None or value == "" else non_negative_number(name, value)


def non_negative_number(name: str, value: Any) -> float:
    """A number >= 0 (0 turns the feature off)."""
    if value is None or value == "" or value == 0 or value == "0":
        return 0.0
    try:
        return float(positive_number(name, value) or 0.0)
    except RequestError:
        raise RequestError(f"{name}: expected a number >= 0 (0: off), got {value!r}") from None


@dataclass(frozen=True)
class Setting:
    """One `-e` setting: how it is read, its default, and one line for the operator."""

    name: str
    parse: Callable[[str, Any], Any]  # (name, value) -> the typed value; RequestError names the setting
    default: Any
    help: str

    @property
    def type(self) -> Any:
        """The type of its value: what its parser returns (plan.json's settings are checked by it)."""
        parse = self.parse.func if isinstance(self.parse, partial) else self.parse
        return typing.get_type_hints(parse)["return"]


SETTINGS: tuple[Setting, ...] = (
    # The grid's axes (analysis.sweep.config.AXES, which grid combines), then the rest of a config.
    *(Setting(a.name, int_list if a.kind is int else bool_list, list(a.default), a.help) for a in AXES),
    Setting("algorithm", text, "", "speculative algorithm; empty = the host's default (EAGLE3, ngram-mod)"),
    Setting("baseline", boolean, True, "also measure the server without speculation"),
    Setting("env_profiles", names, [], "env profiles to compare (specsweep_env_profiles of the hosts)"),
    Setting(
        "host_configs",
        host_config_ids,
        {},
        "per host, config ids measured there besides the grid (the "
        "nightly's: what deploy.yml put into production there)",
    ),
    Setting(
        "adaptive_config",
        text,
        "",
        f"SGLang adaptive schedule file (controller), or `{BUILTIN_SCHEDULE}` for SGLang's own, or vLLM's "
        "Dynamic SD schedule (recommend --vllm-dynamic-config): adds config `adaptive`",
    ),
    # How each config is measured.
    Setting("concurrency", some_ints, [1], "concurrency levels, all measured on each launch"),
    Setting("repeats", one_int, 3, "measured repeats of the prompt set per level"),
    Setting("warmup", partial(one_int, minimum=0), 1, "unmeasured warm-up requests per launch"),
    Setting("max_tokens", one_int, 96, "tokens generated per request (EOS ignored)"),
    # Launches, order and racing (docs/trust.md).
    Setting("launches", one_int, 1, "launches of each config (each its own fact)"),
    Setting("order", choice("random", "grid"), "random", "random: seeded shuffle per host; grid: as listed"),
    Setting("order_seed", optional_int, None, "the shuffle's seed (replays an order); empty = drawn"),
    Setting(
        "baseline_every",
        optional_int,
        None,
        "the baseline again after every K other launches and at the end; 0 = never again; "
        "empty = 10, none where the host's launch spread is from its history",
    ),
    Setting(
        "race",
        optional_bool,
        None,
        "stop launching a config significantly slower than the best; empty = when launches >= 2",
    ),
    Setting(
        "finalists",
        optional_bool,
        None,
        "launch the best and those within noise once more at the end; empty = when launches=1",
    ),
    # The traffic (analysis.workloads): every workload is measured at every level of each launch.
    Setting(
        "workloads", workload_names, [], "shipped workloads: chat, code, math, long; none: the prompt set"
    ),
    Setting("workload_file", text, "", "your own traffic (controller file), measured as workload `file`"),
    Setting(
        "workload_records", partial(one_int, minimum=0), 0, "records per workload (seeded sample); 0: all"
    ),
    Setting("output_len", choice("fixed", "dataset"), "fixed", "fixed (max_tokens) or dataset (the data's)"),
    Setting("mix", mix_shares, {}, "share of requests per workload, chat=0.7,code=0.3: search and recommend"),
    # How each level is driven (docs/load.md): closed loop at c in flight unless request_rate.
    Setting(
        "bench_requests",
        partial(optional_int, minimum=1),
        None,
        "requests per level and repeat (default max(4 x c, prompts))",
    ),
    Setting("bench_duration_s", positive_number, None, "instead of bench_requests: send for this long, s"),
    # Unless one of the two above is given, a level stops once it knows enough (docs/load.md;
    # analysis.sweep.levelsize chooses how where these are empty).
    Setting(
        "bench_ci_pct",
        optional_non_negative,
        None,
        "stop a level when its tok/s 95% CI half-width is this % of it; 0 = send them all; empty = "
        "what a launch is worth where the host's history knows its launch spread and load, else 3",
    ),
    Setting("bench_min_requests", one_int, 8, "a stopping level sends at least this many"),
    Setting(
        "bench_level_budget_s",
        positive_number,
        None,
        "a stopping level sends for at most this long in all, s (its repeats share it); empty = 60, "
        "or a launch's cost where more",
    ),
    Setting("request_rate", positive_number, None, "open loop: Poisson arrivals/s, c in flight at most"),
    Setting("seed", partial(one_int, minimum=0), 42, "seed of the prompts sampled (and the arrivals)"),
    Setting(
        "prefetch",
        boolean,
        True,
        "read the checkpoint into the page cache during each benchmark, for the next launch",
    ),
    Setting("sla_ttft_p99_ms", positive_number, None, "SLO on p99 time to first token, ms (goodput)"),
    Setting("sla_itl_p99_ms", positive_number, None, "SLO on p99 inter-token latency, ms (goodput)"),
    Setting(
        "objective",
        choice(*objectives.NAMES),
        objectives.DEFAULT.name,
        "what ranks configs: throughput, per_user or goodput (docs/results.md)",
    ),
    # How the fleet shares the work.
    Setting("mode", choice("replicate", "shard"), "replicate", "replicate: every host runs every config"),
    Setting("search", choice("", "steps"), "", "steps: search the step counts instead of a grid"),
    Setting("steps_range", int_list, [], "the candidates of search=steps (steps works too)"),
    Setting("max_configs", one_int, 64, "refuse a grid of more configs than this"),
    Setting("lease_s", partial(one_int, minimum=30), 600, "a host stops our servers when unheard this long"),
    # The run itself.
    Setting("plan_only", boolean, False, "only write and print the plan; launch nothing"),
    Setting("sweep_id", one_name, "", "results folder name; empty = a UTC timestamp"),
    Setting("resume", one_name, "", "re-run sweep ID: configs it measured already are skipped"),
    Setting("target", text, "sweep", "inventory group or pattern to sweep"),
    Setting("results_dir", text, "", "controller folder of results/<sweep_id>; empty = <repo>/results"),
)
BY_NAME = {s.name: s for s in SETTINGS}
# The settings `analysis report`/`recommend`/`ingest`/`regress` take as options: what ranks configs.
RANKING = ("sla_ttft_p99_ms", "sla_itl_p99_ms", "objective")


def ranking_options(settings: Mapping[str, Any]) -> list[str]:
    """The sweep's SLOs and objective as `python -m analysis report|recommend|ingest` options (none for
    one unset: a sweep recorded before the objective existed ranks on the default)."""
    given = [(f"--{name.replace('_', '-')}", settings.get(name)) for name in RANKING]
    return [arg for option, value in given if value is not None for arg in (option, str(value))]


# Variables the suite reads besides its settings and its roles' own (role-prefixed) ones: from the
# inventory, and from the nightly's and the release playbook's command lines.
SUITE_VARIABLES = {
    "specsweep_engine": f"the engine a host runs: {' or '.join(NAMES)}",
    "specsweep_env_profiles": "named environment profiles a sweep can compare",
    "specsweep_lock_path": "the host's sweep.lock (default: next to the server pidfiles)",
    "specsweep_follows": "multi-node: the rank-0 host this host runs its part beside",
    "specsweep_nightly": "the nightly's own grid and regression settings",
    "specsweep_request": "defaults for the settings above, set by a calling playbook (the nightly)",
    "specsweep_fail_on_failure": "false: a calling playbook judges failed configs itself",
    "nightly_history": "the nightly's history store (default: results/history.sqlite)",
    "nightly_reports_dir": "where the nightly writes each night's report and regression summary",
    "nightly_prometheus_textfile": "the nightly writes the node_exporter textfile here when set",
    "release": "playbooks/release.yml: the sweep whose servers and locks to release",
    "release_results_dir": "playbooks/release.yml: the results folder holding that sweep",
}


@dataclass(frozen=True)
class Request:
    """A checked request: every setting's value, and the problems found (empty when valid)."""

    values: dict[str, Any]
    errors: list[str]

    def __getitem__(self, name: str) -> Any:
        return self.values[name]


def read(given: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> Request:
    """Every setting from `given` (the -e values), else `defaults` (specsweep_request), else its own."""
    values: dict[str, Any] = {}
    errors: list[str] = []
    unknown = sorted(set(defaults or {}) - set(BY_NAME))
    errors += [f"specsweep_request: {key!r} is not a sweep setting" for key in unknown]
    for setting in SETTINGS:
        raw = given.get(setting.name, (defaults or {}).get(setting.name, setting.default))
        try:
            values[setting.name] = setting.parse(setting.name, raw)
        except RequestError as exc:
            errors.append(str(exc))
    if values.get("finalists") is None and "launches" in values:
        # One launch: the finalists' second launch is the only launch-to-launch check the winner gets;
        # with several, every config has that evidence already (docs/trust.md).
        values["finalists"] = values["launches"] == 1
    if values.get("race") is None and "launches" in values:
        # Racing needs a later launch to stop, and a host that judges its own configs.
        plain = values.get("mode") == "replicate" and not values.get("search")
        values["race"] = values["launches"] >= 2 and plain
    if values.get("search") and values.get("steps_range"):
        values["steps"] = values["steps_range"]  # a search takes its candidates as steps_range
    problems = load_problems(values) + mix_problems(values) + objective_problems(values)
    return Request(values, errors + problems)


# Settings of this run, not of the sweep: a resume takes them from its own command line (target picks
# the play's hosts before the plan runs; resume and results_dir are how the sweep was found).
RUN_ONLY = ("resume", "sweep_id", "plan_only", "target", "results_dir")
# A setting given again replaces the recorded ones `read` derived from it (they are derived anew).
DERIVED = {
    "launches": ("finalists", "race"), "mode": ("race",), "search": ("race",), "steps": ("steps_range",),
}  # fmt: skip


def resumed(recorded: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """The settings a resume keeps from the sweep it resumes (sweep.json's `settings`): every one
    not given again, as `read`'s defaults; a sweep setting no longer known is left out."""
    replaced = set(RUN_ONLY) | set(given) | {d for g in given for d in DERIVED.get(g, ())}
    return {k: v for k, v in recorded.items() if k in BY_NAME and k not in replaced}


def load_problems(values: Mapping[str, Any]) -> list[str]:
    """Load settings that cannot go together (each read on its own already)."""
    requests, levels = values.get("bench_requests"), values.get("concurrency") or []
    if requests is not None and values.get("bench_duration_s") is not None:
        return ["bench_requests: give bench_requests or bench_duration_s, not both"]
    level = max(levels, default=1)
    if requests is not None and requests < requests_needed(level) and values.get("request_rate") is None:
        # An open loop's level is whatever its rate gives, and the table says what it was.
        return [
            f"bench_requests: {requests} is too few for concurrency {level}: the measured window leaves "
            f"out {level - 1} request(s) at each end (ramp and drain) and must hold at least "
            f"{window_minimum(level)}, so at least {requests_needed(level)} per level (default: 4 x c)"
        ]
    return []


def window_minimum(concurrency: int) -> int:
    """Requests a closed-loop level's measured window holds at least (docs/load.md): one per slot, and
    two. The client's rule too (roles/benchmark/files/specsweep_bench.py, checked to agree)."""
    return max(2, concurrency)


def requests_needed(concurrency: int) -> int:
    """Requests a closed-loop level must send: the window's minimum plus c - 1 left out at each end."""
    return window_minimum(concurrency) + 2 * (concurrency - 1)


def objective_problems(values: Mapping[str, Any]) -> list[str]:
    """An objective the sweep's settings cannot rank on (goodput without an SLO)."""
    if "objective" not in values:  # not readable: its own error says why
        return []
    given = any(values.get(name) is not None for name in ("sla_ttft_p99_ms", "sla_itl_p99_ms"))
    objective = objectives.get(values["objective"])
    problem = objectives.sla_problem(objective, given)
    return [problem] if problem else []


def mix_problems(values: Mapping[str, Any]) -> list[str]:
    """A mix naming a workload the sweep does not measure (each its share is read already)."""
    shares = values.get("mix") or {}
    measured = [*(values.get("workloads") or []), *([traffic.NAME] if values.get("workload_file") else [])]
    missing = [w for w in shares if w not in measured]
    if not missing:
        return []
    return [
        f"mix: {', '.join(missing)} not among the workloads measured "
        f"({', '.join(measured) or 'none: set workloads or workload_file'})"
    ]


def unknown_keys(extra_vars: Mapping[str, Any], known: Iterable[str]) -> list[str]:
    """A sentence per `-e` key that is neither a setting nor a variable the suite reads.

    A typo must not silently run the default grid on a fleet; `_raw_params` is what Ansible makes
    of a stray word in key=value form (`-e 'sweep_id=a b'`).
    """
    allowed = set(known) | set(BY_NAME) | set(SUITE_VARIABLES)
    problems = []
    for key, value in extra_vars.items():
        if key == "_raw_params":
            problems.append(
                f"-e: {value!r} is not key=value (quote a value with spaces inside JSON or YAML: "
                """-e '{"key": "a b"}')"""
            )
        elif key not in allowed and not key.startswith("ansible_"):
            close = difflib.get_close_matches(key, sorted(allowed), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems.append(f"{key}: not a sweep setting{hint}")
    return problems
