"""Ansible filters that render an SGLang server's argv and environment.

Plain Python (no Ansible imports), so the functions are importable and unit-testable
without Ansible. Checked against the sglang 0.5.23 wheel: flag spellings come from
sglang/srt/arg_groups/fields/*.py, the speculative rules from
sglang/srt/arg_groups/speculative_hook.py and sglang/srt/speculative/spec_info.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

SGLANG_VERSION_CHECKED = "0.5.23"

# Every name SpeculativeAlgorithm.from_string accepts in 0.5.23 (besides plugin-registered
# ones): the enum members (speculative/spec_info.py:39-47, NONE left out) plus the NEXTN
# alias, which resolves to EAGLE (spec_registry.py:183, speculative_hook.py:109-116).
SGLANG_ALGORITHMS = frozenset(
    {
        "DFLASH",
        "DSPARK",
        "EAGLE",
        "EAGLE3",
        "FROZEN_KV_MTP",
        "NEXTN",
        "NGRAM",
        "STANDALONE",
        "UNO",
    }
)
# The algorithms whose knobs are (steps, topk, draft_tokens), i.e. what a grid point
# describes. DFLASH/DSPARK force steps=topk=1 and size the draft by block size, UNO needs
# a LoRA, FROZEN_KV_MTP is what SGLang promotes NEXTN/EAGLE to for Gemma4 drafts.
SWEEPABLE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
# SGLang does not reject these without a draft path: the draft worker silently falls back
# to the target checkpoint (configs/model_config.py:956 `model_path or cfg.model_path`),
# which for EAGLE/EAGLE3 on a model without MTP layers fails late or drafts nonsense, and
# for STANDALONE drafts with the target itself. So we require the path.
DRAFT_REQUIRED = frozenset({"EAGLE", "EAGLE3", "STANDALONE"})
# NEXTN means "MTP layers shipped in the target checkpoint": for DeepSeek-V3-like
# architectures SGLang fills the draft path from --model-path (speculative_hook.py:1121-1148).
DRAFT_OPTIONAL = frozenset({"NEXTN"})


class ConfigError(ValueError):
    """A setting that cannot be rendered; the message starts with '<variable>: '."""


_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPEC_INTS = ("steps", "topk", "draft_tokens")


def _is_int(value: Any) -> bool:
    """True for real ints; bool is an int subclass but never a count."""
    return isinstance(value, int) and not isinstance(value, bool)


def validate_spec(config: Mapping[str, Any]) -> list[str]:
    """Engine-independent checks of a grid point; returns '<var>: <sentence>' messages."""
    errors: list[str] = []
    speculative = config.get("speculative")
    if not isinstance(speculative, bool):
        return [f"speculative: must be true or false, got {speculative!r}."]
    algorithm = config.get("algorithm")
    if not speculative:
        for key in ("algorithm", *_SPEC_INTS):
            if config.get(key) is not None:
                errors.append(f"{key}: must be unset when speculative is false.")
        return errors
    if algorithm is not None and (not isinstance(algorithm, str) or not algorithm):
        errors.append(f"algorithm: must be a non-empty string, got {algorithm!r}.")
    for key in _SPEC_INTS:
        value = config.get(key)
        if value is not None and (not _is_int(value) or value < 1):
            errors.append(f"{key}: must be an integer >= 1, got {value!r}.")
    if errors:
        return errors
    steps, topk, draft_tokens = (config.get(key) for key in _SPEC_INTS)
    if steps is None:
        # The config id ("s{steps}...") and every engine's draft length need steps;
        # letting the engine pick would make the point unlabeled.
        errors.append("steps: required when speculative is true.")
        for key in ("topk", "draft_tokens"):
            if config.get(key) is not None:
                errors.append(f"{key}: given without steps; set steps as well.")
        return errors
    if draft_tokens is None:
        return errors
    width = 1 if topk is None else topk
    most = steps * width + 1  # the root plus a full tree of steps levels, width wide
    if draft_tokens > most:
        errors.append(
            f"draft_tokens: {draft_tokens} exceeds steps*topk+1 = {most}, more than the draft tree can hold."
        )
    elif width == 1 and draft_tokens != steps + 1:
        errors.append(
            f"draft_tokens: with topk 1 the draft is a chain, so it must be "
            f"steps+1 = {steps + 1}, got {draft_tokens}."
        )
    elif draft_tokens < 2:
        errors.append("draft_tokens: must be at least 2 (the root plus one drafted token).")
    return errors


def _text(server: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    """A string setting; refuses a leading '-' that argparse would read as a flag."""
    value = server.get(key)
    if value is None or value == "":
        if required:
            raise ConfigError(f"{key}: is required.")
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{key}: must be a string, got {type(value).__name__}.")
    if value.startswith("-"):
        raise ConfigError(f"{key}: must not start with '-' (argparse would read it as a flag).")
    if "\0" in value or "\n" in value:
        raise ConfigError(f"{key}: must not contain a newline or NUL.")
    return value


def _number(
    server: Mapping[str, Any],
    key: str,
    cast: Callable[[Any], Any],
    ok: Callable[[Any], bool],
    rule: str,
    *,
    required: bool = False,
) -> Any:
    """A numeric setting; inventory values may arrive as strings, so they are cast."""
    value = server.get(key)
    if value is None or value == "":
        if required:
            raise ConfigError(f"{key}: is required.")
        return None
    if isinstance(value, bool):
        raise ConfigError(f"{key}: must be {rule}, got {value!r}.")
    try:
        number = cast(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}: must be {rule}, got {value!r}.") from None
    if cast is int and isinstance(value, float) and value != number:
        raise ConfigError(f"{key}: must be {rule}, got {value!r}.")
    if not ok(number):
        raise ConfigError(f"{key}: must be {rule}, got {value!r}.")
    return number


def _spec_argv(config: Mapping[str, Any], server: Mapping[str, Any]) -> list[str]:
    """The --speculative-* part of the argv (SGLang-specific rules)."""
    # A grid point without an algorithm takes the host's default (sglang_server_speculative_algorithm).
    algorithm = config.get("algorithm") or server.get("speculative_algorithm")
    if not algorithm:
        raise ConfigError("algorithm: required when speculative is true.")
    name = algorithm.upper()  # SGLang upper-cases it too (speculative_hook.py:142)
    if name not in SGLANG_ALGORITHMS:
        known = ", ".join(sorted(SGLANG_ALGORITHMS))
        raise ConfigError(
            f"algorithm: unknown speculative algorithm {algorithm!r}; "
            f"SGLang {SGLANG_VERSION_CHECKED} accepts {known}."
        )
    if name not in SWEEPABLE_ALGORITHMS:
        raise ConfigError(
            f"algorithm: {name} is not described by steps/topk/draft_tokens; "
            f"specsweep renders {', '.join(SWEEPABLE_ALGORITHMS)}."
        )
    steps = config["steps"]
    topk = config.get("topk")
    draft_tokens = config.get("draft_tokens")
    draft_path = _text(server, "draft_model_path")
    argv = ["--speculative-algorithm", name]

    if name == "NGRAM":
        # NGRAM drafts from a suffix trie of the context: a group's draft model is not passed,
        # so one host can sweep NGRAM beside EAGLE3.
        # SGLang overwrites topk with --speculative-ngram-max-bfs-breadth (default 10,
        # speculative_hook.py:1309-1313), so a topk here would be silently ignored.
        if topk not in (None, 1):
            raise ConfigError(
                "topk: NGRAM ignores it (SGLang sets topk to "
                "--speculative-ngram-max-bfs-breadth); leave it unset."
            )
        # Steps are passed too: otherwise SGLang derives draft_tokens // bfs-breadth,
        # which is 0 for short drafts and mislabels the resolved config.
        tokens = steps + 1 if draft_tokens is None else draft_tokens
        return [
            *argv,
            "--speculative-num-steps",
            str(steps),
            "--speculative-num-draft-tokens",
            str(tokens),
        ]

    if draft_path is None and name in DRAFT_REQUIRED:
        raise ConfigError(
            f"draft_model_path: {name} needs a draft model; use NEXTN for MTP layers "
            "shipped inside the target checkpoint."
        )
    if draft_path is not None:
        argv += ["--speculative-draft-model-path", draft_path]
    width = 1 if topk is None else topk
    if draft_tokens is None:
        if width != 1:
            # SGLang only derives draft tokens for topk 1; with a tree it has no default.
            raise ConfigError("draft_tokens: required when topk > 1.")
        draft_tokens = steps + 1  # the value SGLang forces for topk 1 anyway
    # Steps, topk and draft tokens go together: steps alone crashes SGLang and topk
    # without steps trips an assert (speculative_hook.py:1159-1163).
    return [
        *argv,
        "--speculative-num-steps",
        str(steps),
        "--speculative-eagle-topk",
        str(width),
        "--speculative-num-draft-tokens",
        str(draft_tokens),
    ]


def sglang_argv(config: Mapping[str, Any], server: Mapping[str, Any]) -> list[str]:
    """argv (a list of strings, never shell-joined) to launch SGLang for one grid point."""
    errors = validate_spec(config)
    if errors:
        raise ConfigError(errors[0])
    python = _text(server, "python", required=True)
    argv = [python, "-m", "sglang.launch_server"]
    argv += ["--model-path", _text(server, "model_path", required=True)]
    tp_size = _number(server, "tp_size", int, lambda n: n >= 1, "an integer >= 1", required=True)
    argv += ["--tp-size", str(tp_size)]
    argv += ["--host", _text(server, "host", required=True)]
    port = _number(server, "port", int, lambda n: 0 < n < 65536, "a port number", required=True)
    argv += ["--port", str(port)]
    if config["speculative"]:
        argv += _spec_argv(config, server)

    fraction = _number(
        server,
        "mem_fraction_static",
        float,
        lambda x: 0 < x < 1,
        "a number between 0 and 1",
    )
    if fraction is not None:
        argv += ["--mem-fraction-static", repr(fraction)]
    backend = _text(server, "attention_backend")
    if backend is not None:
        argv += ["--attention-backend", backend]
    # Not --cuda-graph-max-bs: in 0.5.23 that prefix is ambiguous (argparse exits 2).
    max_bs = _number(server, "cuda_graph_max_bs_decode", int, lambda n: n >= 1, "an integer >= 1")
    if max_bs is not None:
        argv += ["--cuda-graph-max-bs-decode", str(max_bs)]
    metrics = server.get("enable_metrics", False)
    if not isinstance(metrics, bool):
        # A string "false" would be truthy; insist on a real YAML boolean.
        raise ConfigError(f"enable_metrics: must be true or false, got {metrics!r}.")
    if metrics:
        argv.append("--enable-metrics")
    api_key = _text(server, "api_key")
    if api_key is not None:
        argv += ["--api-key", api_key]
    argv += _multinode_argv(server)

    extra = server.get("extra_args") or []
    if not isinstance(extra, list) or not all(isinstance(item, str) for item in extra):
        raise ConfigError("extra_args: must be a list of strings.")
    for item in extra:
        if "\0" in item:
            raise ConfigError("extra_args: an item contains a NUL byte.")
    # Last, so an extra flag overrides one rendered above (argparse keeps the last value).
    return argv + list(extra)


def _multinode_argv(server: Mapping[str, Any]) -> list[str]:
    """--nnodes/--node-rank/--dist-init-addr, only when the server spans several nodes."""
    nnodes = _number(server, "nnodes", int, lambda n: n >= 1, "an integer >= 1")
    node_rank = _number(server, "node_rank", int, lambda n: n >= 0, "an integer >= 0")
    addr = _text(server, "dist_init_addr")
    if nnodes is None or nnodes == 1:
        if addr is not None or node_rank not in (None, 0):
            raise ConfigError("nnodes: node_rank/dist_init_addr are set but nnodes is not > 1.")
        return []
    if node_rank is None:
        raise ConfigError("node_rank: required when nnodes > 1.")
    if node_rank >= nnodes:
        raise ConfigError(f"node_rank: must be below nnodes ({nnodes}), got {node_rank}.")
    if addr is None:
        raise ConfigError("dist_init_addr: required when nnodes > 1 (host:port of rank 0).")
    return [
        "--nnodes",
        str(nnodes),
        "--node-rank",
        str(node_rank),
        "--dist-init-addr",
        addr,
    ]


def _env_value(key: str, value: Any) -> str:
    """Stringify one environment value; bools become 1/0, which is what C readers expect."""
    if isinstance(value, bool):
        text = "1" if value else "0"
    elif isinstance(value, (str, int, float)):
        text = str(value)
    else:
        raise ConfigError(f"{key}: value must be a string or number, got {type(value).__name__}.")
    if "\n" in text or "\0" in text:
        raise ConfigError(f"{key}: value must not contain a newline or NUL.")
    return text


def sglang_env(
    base_env: Mapping[str, Any] | None, profile_env: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """Merge the server env with an env profile's (profile wins) into str -> str.

    A null value in the profile removes that key from the base, so a profile can
    return to a library default (e.g. drop NCCL_ALGO).
    """
    merged: dict[str, str] = {}
    for source, layer in (("base_env", base_env), ("profile_env", profile_env)):
        if layer is None:
            continue
        if not isinstance(layer, Mapping):
            raise ConfigError(f"{source}: must be a mapping, got {type(layer).__name__}.")
        for key, value in layer.items():
            if not isinstance(key, str) or not _ENV_KEY.fullmatch(key):
                raise ConfigError(f"{key!r}: not a valid environment variable name.")
            if value is None:
                if source == "base_env":
                    raise ConfigError(f"{key}: value is null.")
                merged.pop(key, None)
                continue
            merged[key] = _env_value(key, value)
    return merged


class FilterModule:
    """Ansible entry point: {{ config | sglang_argv(server) }}, {{ env | sglang_env(p) }}."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        """Filter name -> function."""
        return {"sglang_argv": sglang_argv, "sglang_env": sglang_env}
