"""Controller-side parsing and validation of a sweep request into grid points.

Every value typed after `-e` arrives here first; nothing reaches a host until
`sweep_plan()` returns no errors. Messages name the variable and what is allowed.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

# Speculative algorithms each engine understands (SGLang 0.5.x: server_args.py choices).
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "sglang": ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"),
    "llama_cpp": ("ngram-mod",),
}
# \Z, not $: "$" also matches before a trailing newline, which would pass "id\n".
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
INT_RE = re.compile(r"^[+-]?\d+$")
RANGE_RE = re.compile(r"^(\d+)\.\.(\d+)$")


class RequestError(ValueError):
    """One problem with the request, phrased for the operator."""


def parse_int_list(name: str, value: Any, minimum: int = 1) -> list[int]:
    """Accept 2, [1, 2], "1,2,4", "[1,2,4]" or "1..10"; reject anything else by name."""
    if value is None or value == "" or value == []:
        return []
    if isinstance(value, bool):
        raise RequestError(f"{name}: expected integers, got {value!r}")
    if isinstance(value, int):
        items: list[Any] = [value]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    elif isinstance(value, str):
        text = value.strip().removeprefix("[").removesuffix("]").strip()
        span = RANGE_RE.match(text)
        if span:
            lo, hi = int(span[1]), int(span[2])
            if lo > hi:
                raise RequestError(f"{name}: range {value!r} is empty (write low..high)")
            items = list(range(lo, hi + 1))
        else:
            items = [t.strip() for t in text.split(",")]
    else:
        raise RequestError(f"{name}: expected integers, got {value!r}")
    out = []
    for item in items:
        if isinstance(item, bool) or not (
            isinstance(item, int) or (isinstance(item, str) and INT_RE.match(item))
        ):
            raise RequestError(f"{name}: {item!r} is not a whole number (got {value!r})")
        number = int(item)
        if number < minimum:
            raise RequestError(f"{name}: {number} is below the minimum of {minimum}")
        out.append(number)
    return sorted(set(out))


def parse_bool(name: str, value: Any) -> bool:
    """Booleans as YAML or `-e key=value` strings spell them."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise RequestError(f"{name}: expected true or false, got {value!r}")


def config_id(steps: int | None, topk: int | None, draft: int | None, profile: str) -> str:
    """File-safe name of a grid point, e.g. baseline, s2, s5-k4-d8, s2+nccl_ll_ring."""
    base = "baseline" if steps is None else f"s{steps}"
    if topk is not None:
        base += f"-k{topk}-d{draft}"
    return base if profile == "default" else f"{base}+{profile}"


def spec_problem(steps: int, topk: int | None, draft: int | None) -> str | None:
    """Why (steps, topk, draft tokens) is invalid or pointless, or None if it is fine."""
    if draft is not None and topk is None:
        return "draft_tokens needs topk (SGLang takes steps, topk and draft tokens together)"
    if topk is None:
        return None
    if draft > steps * topk + 1:
        most = steps * topk + 1
        return f"draft_tokens {draft} > steps*topk+1 = {most} (the extra tokens can never be drafted)"
    if topk == 1 and draft != steps + 1:
        return f"with topk 1, SGLang forces draft_tokens to steps+1 = {steps + 1}, not {draft}"
    return None


def build_configs(request: dict[str, Any], engines: list[str]) -> tuple[list[dict], list[str]]:
    """Grid points for a request, and warnings about grid cells left out."""
    steps = parse_int_list("steps", request.get("steps"))
    topks = parse_int_list("topk", request.get("topk"))
    drafts = parse_int_list("draft_tokens", request.get("draft_tokens"))
    baseline = parse_bool("baseline", request.get("baseline", True))
    algorithm = request.get("algorithm") or None
    profiles = parse_names("env_profiles", request.get("env_profiles")) or ["default"]

    if (topks or drafts) and not steps:
        name = "topk" if topks else "draft_tokens"
        raise RequestError(
            f"{name}: given without steps (SGLang takes steps, topk and draft tokens together)"
        )
    if topks and "llama_cpp" in engines:
        raise RequestError("topk: applies to SGLang only, but a targeted host runs llama_cpp")
    if algorithm is not None:
        for engine in engines:
            if algorithm not in ALGORITHMS[engine]:
                allowed = ", ".join(ALGORITHMS[engine])
                raise RequestError(f"algorithm: {algorithm!r} is not known to {engine} (one of: {allowed})")
    if drafts and not topks:
        raise RequestError("draft_tokens: needs topk (SGLang takes steps, topk and draft tokens together)")

    configs: list[dict] = []
    warnings: list[str] = []
    for profile in profiles:
        if baseline:
            configs.append(_config(None, None, None, None, profile))
        for s, k, d in itertools.product(steps, topks or [None], drafts or [None]):
            if k is not None and d is None:
                if k != 1:
                    raise RequestError(f"draft_tokens: required when topk is {k} (steps {s})")
                d = s + 1  # what SGLang forces for topk 1
            problem = spec_problem(s, k, d)
            if problem and len(steps) * len(topks or [0]) * len(drafts or [0]) == 1:
                raise RequestError(f"draft_tokens: {problem}")
            if problem:
                warnings.append(f"skipped steps={s} topk={k} draft_tokens={d}: {problem}")
                continue
            configs.append(_config(s, k, d, algorithm, profile))
    if not configs:
        detail = f": {warnings[0].split(': ', 1)[1]}" if warnings else ""
        raise RequestError(f"steps/topk/draft_tokens: nothing valid to sweep{detail}")
    return configs, warnings


def _config(
    steps: int | None,
    topk: int | None,
    draft: int | None,
    algorithm: str | None,
    profile: str,
) -> dict:
    return {
        "id": config_id(steps, topk, draft, profile),
        "speculative": steps is not None,
        "algorithm": algorithm if steps is not None else None,
        "steps": steps,
        "topk": topk,
        "draft_tokens": draft,
        "env_profile": profile,
    }


def _one_int(name: str, value: Any, minimum: int = 1) -> int:
    """Exactly one whole number (a list or range is an error, not silently its smallest item)."""
    numbers = parse_int_list(name, value, minimum)
    if len(numbers) != 1:
        raise RequestError(f"{name}: expected one whole number >= {minimum}, got {value!r}")
    return numbers[0]


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    """One of a few words."""
    if value not in allowed:
        raise RequestError(f"{name}: {value!r} is not one of: {', '.join(allowed)}")
    return value


def _some_ints(name: str, value: Any) -> list[int]:
    """One or more whole numbers >= 1."""
    numbers = parse_int_list(name, value)
    if not numbers:
        raise RequestError(f"{name}: expected one or more whole numbers, got {value!r}")
    return numbers


def search_problems(request: dict[str, Any], configs: list[dict]) -> list[str]:
    """Why a step search cannot run on this grid: it varies steps alone, over at least 3 values."""
    problems = []
    for name in ("topk", "draft_tokens"):
        if len(parse_int_list(name, request.get(name))) > 1:
            problems.append(f"{name}: search=steps varies steps only; give one {name} value, not a list")
    per_profile = Counter(c["env_profile"] for c in configs if c["speculative"])
    if not per_profile or min(per_profile.values()) < 3:
        problems.append("steps_range: search=steps needs at least 3 step counts, e.g. steps_range=1..10")
    return problems


def parse_names(name: str, value: Any) -> list[str]:
    """Names as a list or "a,b" / "[a,b]"; each must be a plain identifier."""
    if value is None or value == "" or value == []:
        return []
    if isinstance(value, str):
        items = [t.strip().strip("'\"") for t in value.strip().removeprefix("[").removesuffix("]").split(",")]
    elif isinstance(value, (list, tuple)):
        items = [str(v) for v in value]
    else:
        raise RequestError(f"{name}: expected a list of names, got {value!r}")
    bad = [i for i in items if not ID_RE.match(i)]
    if bad:
        raise RequestError(f"{name}: {bad[0]!r} is not a name (letters, digits, '.', '_', '-')")
    return list(dict.fromkeys(items))


def sweep_plan(
    request: dict[str, Any], engines: list[str], host_profiles: list[list[str]] | None = None
) -> dict[str, Any]:
    """{configs, warnings, errors, settings}: the whole request checked at once.

    host_profiles: for each targeted host, the env profile names it defines.
    """
    errors: list[str] = []
    settings: dict[str, Any] = {}
    configs: list[dict] = []
    warnings: list[str] = []
    checks = {
        "repeats": lambda v: _one_int("repeats", v),
        "warmup": lambda v: _one_int("warmup", v, minimum=0),
        "max_tokens": lambda v: _one_int("max_tokens", v),
        "concurrency": lambda v: _some_ints("concurrency", v),
        "plan_only": lambda v: parse_bool("plan_only", v),
        "mode": lambda v: _choice("mode", v or "replicate", ("replicate", "shard")),
        "search": lambda v: _choice("search", v or "", ("", "steps")),
    }
    for name, check in checks.items():
        try:
            settings[name] = check(request.get(name))
        except RequestError as exc:
            errors.append(str(exc))
    sweep_id = str(request.get("sweep_id") or "")
    if sweep_id and not ID_RE.match(sweep_id):
        errors.append(f"sweep_id: {sweep_id!r} may use letters, digits, '.', '_' and '-' only")
    settings["sweep_id"] = sweep_id
    unknown = sorted(set(engines) - set(ALGORITHMS))
    if unknown:
        errors.append(f"specsweep_engine: {', '.join(unknown)} is not one of: {', '.join(ALGORITHMS)}")
    else:
        try:
            configs, warnings = build_configs(request, engines)
        except RequestError as exc:
            errors.append(str(exc))
    if settings.get("search") and configs:
        errors += search_problems(request, configs)
    defined = set.intersection(*(set(p) for p in host_profiles)) if host_profiles else set()
    missing = sorted({c["env_profile"] for c in configs} - defined - {"default"})
    if missing:
        errors.append(
            f"env_profiles: {', '.join(missing)} not defined in specsweep_env_profiles of every targeted host"
        )
    return {
        "configs": configs,
        "warnings": warnings,
        "errors": errors,
        "settings": settings,
    }


def plan_entries(
    configs: list[dict], argvs: Any, env: dict[str, Any], profiles: dict[str, dict] | None = None
) -> list[dict]:
    """Pair each config with the argv an engine filter rendered for it, and its env with its profile's."""
    entries = []
    for config, argv in zip(configs, argvs, strict=True):
        merged = dict(env)
        for key, value in (profiles or {}).get(config["env_profile"], {}).items():
            if value is None:
                merged.pop(key, None)  # a profile can take a base setting away (library default)
            else:
                merged[key] = value
        resolved = {str(k): str(v) for k, v in merged.items()}
        for key, value in resolved.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) or any(c in value for c in "\n\0"):
                raise ValueError(f"env: {key!r} is not a valid name, or its value holds a newline/NUL")
        entries.append({"config": config, "argv": list(argv), "env": resolved})
    return entries


def measured(sweep_dir: str, config_id: str, host: str | None = None) -> bool:
    """True when the sweep folder holds an ok fact for this config (on `host`, or on any host)."""
    pattern = f"{host or '*'}/{config_id}.json"
    for path in Path(sweep_dir).glob(pattern):
        try:
            if json.loads(path.read_text(encoding="utf-8")).get("status") == "ok":
                return True
        except (OSError, ValueError):
            continue  # unreadable: not measured, so it is measured again
    return False


def unmeasured(
    sweep_dir: str, hosts: list[str], configs: list[dict], settings: dict[str, Any], states: dict[str, str]
) -> list[str]:
    """'host: state; not measured: a, b' for each host that left configs without a fact.

    Failed configs have a fact (and are reported as failures); this is what no fact records:
    hosts lost before or during the sweep. Shard mode and searches expect each host's baselines;
    a shard config no host measured is listed under '(shard)'.
    """
    present = {(p.parent.name, p.stem) for p in Path(sweep_dir).glob("*/*.json")}
    shared = settings.get("mode") == "shard" or bool(settings.get("search"))
    lines = []
    for host in hosts:
        expected = [c["id"] for c in configs if not (shared and c["speculative"])]
        missing = [cid for cid in expected if (host, cid) not in present]
        if missing:
            lines.append(f"{host}: {states.get(host, 'not reached')}; not measured: {', '.join(missing)}")
    if settings.get("mode") == "shard" and not settings.get("search"):
        nobody = [c["id"] for c in configs if c["speculative"] and c["id"] not in {cid for _, cid in present}]
        if nobody:
            lines.append(f"(shard): not measured by any host: {', '.join(nobody)}")
    return lines


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "specsweep_plan": sweep_plan,
            "specsweep_entries": plan_entries,
            "specsweep_measured": measured,
            "specsweep_unmeasured": unmeasured,
        }
