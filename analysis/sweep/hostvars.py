"""Every variable the suite reads from a host's inventory, checked at plan time, naming where it came from.

Ansible checks a role's meta/argument_specs.yml only when the role runs (preflight or later, host by
host), and a sweep setting (`steps`, `lease_s`) or a role variable the sweep sets from one
(`benchmark_concurrency`) found in the inventory is silently overridden. The plan calls `check` for
each targeted host, before any host is touched: a bad value is refused with the variable, the value
and its source (`-e`, a host var, a group var), and a sweep setting in the inventory is refused
rather than ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from analysis.sweep import request

# Role variables the sweep sets from its own settings (the plan's client argv, playbooks/tasks/measure.yml):
# in the inventory they would be overridden, so each is refused there, naming what to set instead.
SET_BY_SWEEP = {
    "benchmark_argv": "the benchmark_* variables it is built from, and -e concurrency=... etc.",
    "benchmark_concurrency": "-e concurrency=...",
    "benchmark_repeats": "-e repeats=...",
    "benchmark_warmup": "-e warmup=...",
    "benchmark_max_tokens": "-e max_tokens=...",
    "benchmark_records": "-e workloads=... or -e workload_file=...",
    "benchmark_requests": "-e bench_requests=...",
    "benchmark_duration_s": "-e bench_duration_s=...",
    "benchmark_request_rate": "-e request_rate=...",
    "benchmark_ci_pct": "-e bench_ci_pct=...",
    "benchmark_min_requests": "-e bench_min_requests=...",
    "benchmark_level_budget_s": "-e bench_level_budget_s=...",
    "benchmark_seed": "-e seed=...",
    "server_process_lease_s": "-e lease_s=...",
    "wait_for_health_timeout_s": "<engine role>_health_timeout_s (llama_server_, sglang_server_)",
}
# Smallest value of a number, by the end of its name (argument specs have types, not ranges); any
# other number must be >= 0 (no negative seconds or counts).
MINIMUM = (("_port", 1), ("_timeout_s", 1), ("_interval_s", 0.01), ("_lease_s", 30))
MAX_PORT = 65535
_INT = re.compile(r"^[+-]?\d+$")
_TRUE_FALSE = ("true", "false", "yes", "no", "on", "off", "1", "0")


def role_options(roles: Path) -> dict[str, dict[str, Any]]:
    """Every option of every role's argument specs (all entry points), by variable name."""
    options: dict[str, dict[str, Any]] = {}
    for path in sorted(roles.glob("*/meta/argument_specs.yml")):
        for spec in yaml.safe_load(path.read_text())["argument_specs"].values():
            for name, option in (spec.get("options") or {}).items():
                options.setdefault(name, option)
    return options


def _number(kind: str, value: Any) -> float | None:
    """`value` as an int or float of `kind`, from YAML or from an `-e key=value` string; None if it is not."""
    if isinstance(value, bool):
        return None
    if kind == "int":
        if isinstance(value, int) or (isinstance(value, str) and _INT.match(value.strip())):
            return int(value)
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def value_problem(name: str, option: Mapping[str, Any], value: Any) -> str | None:
    """What is wrong with `value` for the role option `name` (its type, choices and range), or None."""
    if value is None:
        return None  # unset: the role's own default or "not given" applies
    kind = option.get("type", "str")
    if kind in ("int", "float"):
        number = _number(kind, value)
        if number is None:
            return f"expected {'a whole number' if kind == 'int' else 'a number'}"
        low = next((m for end, m in MINIMUM if name.endswith(end)), 0)
        if number < low:
            return f"must be at least {low}"
        if name.endswith("_port") and number > MAX_PORT:
            return f"must be at most {MAX_PORT}"
    elif kind == "bool":
        if not isinstance(value, bool) and str(value).strip().lower() not in _TRUE_FALSE:
            return "expected true or false"
    elif kind == "list" and not isinstance(value, list):
        return "expected a list"
    elif kind == "dict" and not isinstance(value, dict):
        return "expected a mapping"
    elif kind in ("str", "path") and isinstance(value, list | dict):
        return "expected a string"
    choices = option.get("choices")
    if choices and value not in choices:
        return f"expected one of {', '.join(map(str, choices))}"
    return None


def check(
    host: str,
    layers: list[tuple[str, Mapping[str, Any]]],
    options: Mapping[str, Mapping[str, Any]],
    resolve: Any,
) -> list[str]:
    """A sentence per bad variable of `host`.

    `layers`: where its variables come from, highest precedence first, each (source, its variables),
    e.g. ("-e", extra vars), ("host vars of gpu-1", ...), ("group vars of gpu", ...); `resolve(name)` is
    the variable's value as the host's tasks see it (templated). Role defaults are not a layer: they
    are the suite's own.
    """
    problems = []
    for name in sorted({key for _, found in layers for key in found}):
        source = next(where for where, found in layers if name in found)
        # In the inventory these are never read (-e or the sweep wins), whatever -e says.
        placed = [(where, found[name]) for where, found in layers if where != "-e" and name in found]
        if placed and (name in request.BY_NAME or name in SET_BY_SWEEP):
            where, value = placed[0]
            setting = name in request.BY_NAME
            what = "a sweep setting, read from -e only" if setting else "set by the sweep itself"
            use = f"-e {name}=..." if setting else SET_BY_SWEEP[name]
            problems.append(f"{name}: {value!r} from {where} is {what}: use {use} (refused, not ignored)")
            continue
        if name not in options:
            continue
        try:
            value = resolve(name)
        except Exception as exc:  # an undefined name or a bad template, as Ansible says it
            problems.append(f"{name}: from {source}, cannot be rendered for {host}: {exc}")
            continue
        wrong = value_problem(name, options[name], value)
        if wrong:
            problems.append(f"{name}: {value!r} from {source}: {wrong}")
    return problems
