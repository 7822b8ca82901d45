"""vLLM (`vllm serve MODEL --speculative-config JSON`), GPU; never installed by specsweep.

The steps axis is `num_speculative_tokens`; the method is the config's algorithm (or the host's
vllm_server_speculative_method), its knobs the host's settings (n-gram prompt lookup, the draft
model and its tensor parallel size). The JSON object and vLLM's rules for it are
analysis.engines.vllm_spec's (read from vLLM 0.33.0's own source); every flag below is one of
`vllm serve`'s in 0.33.0 (vllm/engine/arg_utils.py EngineArgs.add_cli_args: --tensor-parallel-size,
--speculative-config, --gpu-memory-utilization, --max-num-seqs; vllm/entrypoints/common/cli_args.py
FrontendArgs: --host, --port, --api-key; the model is `vllm serve`'s positional model_tag).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from analysis.engines import vllm_spec
from analysis.engines.base import (
    BUILTIN_SCHEDULE,
    COMMON_SETTINGS,
    Adaptive,
    Engine,
    Point,
    ScheduleError,
    SettingError,
    Settings,
    number,
    port_of,
    text,
    user_env,
    words,
)
from analysis.redact import redact_argv

NAME = "vllm"
# The methods a grid point describes with num_speculative_tokens alone (vllm_spec.METHODS has the
# rest: dflash, dspark, custom classes and the deprecated *_mtp spellings of mtp).
ALGORITHMS = ("eagle3", "eagle", "ngram", "draft_model", "mtp", "suffix")
# `python -m` of what `vllm serve` runs (vllm/entrypoints/launchers/api_server/entry.py main: the same
# make_arg_parser, without the serve subcommand's positional model), in 0.32.0 and 0.33.0.
MODULE = "vllm.entrypoints.launchers.api_server.entry"
ENTRIES = ("script", "module")
# Methods that draft with a model of their own: vllm_server_draft_model_path (mtp uses the target's heads).
_DRAFTED = ("eagle3", "eagle", "draft_model")


def problems(config: Point) -> list[str]:
    """Why vLLM cannot run a config whatever the host: a method outside those swept."""
    if config.speculative and config.algorithm not in (None, *ALGORITHMS):
        known = ", ".join(ALGORITHMS)
        where = "vllm/config/speculative.py:SpeculativeConfig.method"
        return [f"algorithm: {config.algorithm!r} is not swept on vllm (one of: {known}; {where})"]
    return []


def _method(config: Point, s: Settings) -> str:
    """The config's method, else the host's."""
    method = config.algorithm or text(s, "speculative_method")
    if not method:
        raise SettingError("speculative_method: required when a config names no algorithm.")
    if method not in ALGORITHMS:
        raise SettingError(f"speculative_method: {method!r} is not one of: {', '.join(ALGORITHMS)}.")
    return method


def spec_config(config: Point, s: Settings) -> dict[str, Any]:
    """The --speculative-config object of a speculative config on this host (unset knobs: vLLM's
    defaults); vllm_spec.SpecConfigError, naming vLLM's rules, when the host's release would refuse it."""
    method = _method(config, s)
    ngram, drafted = method == "ngram", method in _DRAFTED

    def knob(key: str, used: bool) -> int | None:
        return number(s, key, int, lambda n: n >= 1, "an integer >= 1") if used else None

    spec = vllm_spec.speculative_config(
        method,
        config.steps,
        draft_model=text(s, "draft_model_path") if drafted else None,
        prompt_lookup_min=knob("prompt_lookup_min", ngram),
        prompt_lookup_max=knob("prompt_lookup_max", ngram),
        draft_tensor_parallel_size=knob("draft_tensor_parallel_size", drafted),
    )
    if config.adaptive:
        # The arm's schedule, checked by vLLM's rules with the rest of the object.
        try:
            schedule = load_schedule(str(s.get("adaptive_config")))
        except ScheduleError as exc:
            raise SettingError(f"adaptive_config: {exc}") from None
        spec["num_speculative_tokens_per_batch_size"] = schedule["num_speculative_tokens_per_batch_size"]
    refused = vllm_spec.problems(spec, text(s, "version"))  # the host's release
    if refused:
        raise vllm_spec.SpecConfigError("; ".join(refused))
    return spec


# ---------------------------------------------------------------------------------------------
# The Dynamic SD arm (-e adaptive_config=FILE): vLLM's own step count per batch-size range
# ---------------------------------------------------------------------------------------------

# What `recommend --vllm-dynamic-config` writes (vllm_spec.dynamic_config): the arm's schedule file.
_SCHEDULE_KEYS = ("num_speculative_tokens", "num_speculative_tokens_per_batch_size")


def load_schedule(path: str) -> dict[str, Any]:
    """A Dynamic SD schedule file: its two keys, nothing else (vLLM's rules check them with the rest
    of the --speculative-config object)."""
    try:
        schedule = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ScheduleError(f"{path}: cannot read it as JSON: {exc}") from exc
    if not isinstance(schedule, dict) or set(schedule) != set(_SCHEDULE_KEYS):
        got = list(schedule) if isinstance(schedule, dict) else type(schedule).__name__
        raise ScheduleError(
            f"{path}: expected a vLLM Dynamic SD schedule with {' and '.join(_SCHEDULE_KEYS)} (as "
            f"`recommend --vllm-dynamic-config` writes), got {got}"
        )
    return schedule


def _arm_problems(s: Settings, algorithm: str | None, topks: Sequence[int]) -> list[str]:
    """vLLM takes any method's schedule; on Model Runner V1 it drops some (vllm_spec.dynamic_notes)."""
    del s, algorithm, topks  # the schedule's own rules are checked with each config's object
    return []


def _host_schedule(s: Settings, given: str, host: str) -> tuple[str | None, dict[str, Any]]:
    """The schedule this host follows: the file; vLLM has no built-in one."""
    del s
    if given == BUILTIN_SCHEDULE:
        return (
            f"adaptive_config: vLLM on {host} has no built-in Dynamic SD schedule; write one from a sweep "
            "with `python -m analysis recommend --vllm-dynamic-config FILE`",
            {},
        )
    try:
        return None, load_schedule(given)
    except ScheduleError as exc:
        return f"adaptive_config: {host}: {exc}", {}


def _start(schedule: dict[str, Any]) -> int:
    """num_speculative_tokens: the most steps any batch size takes (vLLM caps each K at it)."""
    most = schedule.get("num_speculative_tokens")
    if not isinstance(most, int) or isinstance(most, bool) or most < 1:
        raise ScheduleError(f"num_speculative_tokens must be an integer >= 1, got {most!r}")
    return most


def _notes(given: str, schedule: dict[str, Any], levels: Sequence[int]) -> list[str]:
    """The load levels at which the schedule takes 0 steps: there the arm runs without speculation."""
    ranges = [
        r for r in schedule["num_speculative_tokens_per_batch_size"] if isinstance(r, list) and len(r) == 3
    ]
    off = [n for n in levels if any(lo <= n <= hi and k == 0 for lo, hi, k in ranges)]
    at = ", ".join(map(str, off))
    return [f"adaptive: the Dynamic SD schedule {given} takes 0 steps at concurrency {at}"] if off else []


def refusals(config: Point, s: Settings) -> list[str]:
    """vLLM's own rules that refuse this config on this host, naming where vLLM has each; a setting
    that cannot be read is left to the argv, which names it."""
    if not config.speculative:
        return []
    try:
        spec_config(config, s)
    except SettingError:
        return []
    except vllm_spec.SpecConfigError as exc:
        return [str(exc)]
    return []


def argv(config: Point, s: Settings, slots: int) -> list[str]:
    """`vllm serve` for one config, from the environment of vllm_server_python: its `vllm` script, or
    the module that script runs (vllm_server_entry)."""
    python = text(s, "python", required=True)
    model = text(s, "model_path", required=True)
    entry = text(s, "entry") or ENTRIES[0]
    if entry not in ENTRIES:
        raise SettingError(f"entry: {entry!r} is not one of: {', '.join(ENTRIES)}.")
    if entry == "module":
        out = [python, "-m", MODULE, "--model", model]
    else:
        out = [str(PurePosixPath(python).parent / "vllm"), "serve", model]
    tp_size = number(s, "tp_size", int, lambda n: n >= 1, "an integer >= 1", required=True)
    out += ["--tensor-parallel-size", str(tp_size)]
    out += ["--host", text(s, "host", required=True), "--port", str(port_of(s))]
    if config.speculative:
        try:
            spec = spec_config(config, s)
        except vllm_spec.SpecConfigError as exc:
            raise SettingError(f"speculative_method: vLLM refuses it: {exc}.") from None
        # One argv word: the JSON object (vLLM parses the flag's value with json.loads).
        out += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
    fraction = number(s, "gpu_memory_utilization", float, lambda x: 0 < x <= 1, "a number in (0, 1]")
    if fraction is not None:
        out += ["--gpu-memory-utilization", repr(fraction)]
    # Every level of the sweep runs at once: vLLM's batch must hold the highest (an operator's own
    # value below it is refused: the client would count queued requests as running).
    levels = sorted(set(s.get("levels") or ())) or [slots]
    seqs = number(s, "max_num_seqs", int, lambda n: n >= 1, "an integer >= 1")
    if seqs is not None and seqs < levels[-1]:
        raise SettingError(
            f"max_num_seqs: {seqs} is below the sweep's concurrency level {levels[-1]}: vLLM would queue "
            f"what the client counts as running; raise it to {levels[-1]} or drop the level."
        )
    out += ["--max-num-seqs", str(seqs)] if seqs is not None else []
    api_key = text(s, "api_key")
    if api_key is not None:
        out += ["--api-key", api_key]
    # Last, so an extra flag overrides one rendered above (argparse keeps the last value).
    return out + words(s, "extra_args")


# ---------------------------------------------------------------------------------------------
# Preflight (roles/vllm_server): the host's own vLLM parses and resolves every planned argv
# ---------------------------------------------------------------------------------------------


def check_input(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What roles/vllm_server/files/specsweep_vllm_check.py reads on the host: each planned config's
    words for `vllm serve`'s parser (`serve MODEL ...`, or `serve --model MODEL ...` for the module,
    whose parser is the same less the positional model), the API key redacted (it parses alike)."""

    def words(argv: list[str]) -> list[str]:
        return ["serve", *argv[3:]] if argv[1:3] == ["-m", MODULE] else argv[1:]

    return {"argvs": {e["config"]["id"]: words(redact_argv(e["argv"])) for e in entries}}


def found(checked: Mapping[str, Any], on: Mapping[str, Any]) -> dict[str, Any]:
    """The version the host's vLLM reported and why it stops the host: vLLM cannot be imported, it is
    another release than the plan checked its configs for, or it refuses a config's argv (naming the
    config, the flag and vLLM's own message). `checked`: the registered check (skipped when the host
    had problems already, or nothing to check); `on`: host, the planned version, the import's."""
    host = on["host"]
    result = {"version": on.get("imported"), "error": None, "results": {}}
    if not checked.get("skipped"):
        result = json.loads(checked["stdout"])
    if result["error"]:
        return {
            "version": None,
            "problems": [f"vllm_server_python: {host}: vLLM cannot be imported: {result['error']}"],
        }
    has = result["version"]
    if not has:
        return {"version": None, "problems": []}  # host facts say it did not import
    planned = str(on.get("version") or vllm_spec.VERSION_CHECKED)
    refused = [
        f"{host}: {config_id}: vLLM {has} refuses {why['flag'] or 'the argv'}: {why['message']}"
        for config_id, why in (result["results"] or {}).items()
        if why
    ]
    if has.split("+")[0] == planned:
        return {"version": has, "problems": refused}
    # Only the release rule can refuse this object (an n-gram config every release takes).
    older = vllm_spec.problems({"method": "ngram", "num_speculative_tokens": 1}, has)
    why = [f"vllm_server_version: {host}: {p}" for p in older] or [
        f"vllm_server_version: {host} runs vLLM {has}, not the {planned} the plan checked its "
        f"--speculative-config for; set vllm_server_version: {has} for this host"
    ]
    return {"version": has, "problems": why + refused}


ENGINE = Engine(
    name=NAME,
    checkpoints=("model_path", "draft_model_path"),
    role="vllm_server",
    settings=(
        *COMMON_SETTINGS,
        "python",
        "entry",
        "version",
        "draft_model_path",
        "speculative_method",
        "tp_size",
        "prompt_lookup_min",
        "prompt_lookup_max",
        "draft_tensor_parallel_size",
        "gpu_memory_utilization",
        "max_num_seqs",
        "api_key",
    ),
    argv=argv,
    base_env=user_env,  # NCCL_*, VLLM_* ...
    version=lambda s: None,  # the host reports it: `import vllm` under vllm_server_python, in preflight
    problems=problems,
    refusals=refusals,
    adaptive=Adaptive(
        label="vLLM",
        flag="vLLM's Dynamic SD, num_speculative_tokens_per_batch_size",
        problems=_arm_problems,
        schedule=_host_schedule,
        start=_start,
        notes=_notes,
    ),
    check_input=check_input,
    found=found,
    algorithms=ALGORITHMS,
    assumed_tps=90.0,
)
