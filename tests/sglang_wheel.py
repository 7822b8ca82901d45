"""SGLang's own source (0.5.23, and older releases where a test asks), from its PyPI wheels
(downloaded once, never installed or imported).

The tests read its argument parsers and benchmark code to check what we pass it.
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import copy
import itertools
import json
import logging
import math
import sys
import types
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from wheels import ROOT, unpacked

VERSION = "0.5.23"
CACHE = ROOT / f"sglang-{VERSION}"


def sglang_source(*parts: str, version: str = VERSION) -> Path:
    """The unpacked `sglang` package of release `version` with at least `parts` (paths or folder
    prefixes in the wheel, e.g. "sglang/srt/") present; returns the package folder."""
    return unpacked("sglang", version, parts) / "sglang"


# What the loader and the classes that use it need from the rest of sglang (the module imports
# server args and runtime context, which pull in torch): the names below are stubbed, the code is
# SGLang's own, taken from the wheel's source by name.
TAKEN = ("DEFAULT_ADAPTIVE_CONFIG", "_load_adaptive_config", "AdaptiveStepSlot", "AdaptiveSpeculativeParams")


def sglang_adaptive() -> dict[str, Any]:
    """_load_adaptive_config and the classes that route a batch with it, from the 0.5.23 source."""
    path = sglang_source("sglang/srt/speculative/") / "srt" / "speculative" / "adaptive_spec_params.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    kept = []
    for node in tree.body:
        names = [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        if getattr(node, "name", None) in TAKEN or set(names) & set(TAKEN):
            kept.append(node)
    assert len(kept) == len(TAKEN), f"0.5.23's adaptive_spec_params.py changed: found {len(kept)} of {TAKEN}"
    namespace: dict[str, Any] = {
        "json": json, "math": math, "bisect": bisect, "cached_property": cached_property,
        "logger": logging.getLogger("sglang-adaptive-test"), "log_info_on_rank0": lambda *_: None,
        "__name__": "sglang_adaptive_spec_params",
    }  # fmt: skip
    exec(compile(ast.Module(kept, type_ignores=[]), str(path), "exec"), namespace)  # SGLang's own code
    return namespace


# --------------------------------------------------------------------------------------------
# Resolution of max_running_requests and the decode CUDA graphs, by SGLang's own handlers
# --------------------------------------------------------------------------------------------
# The real `prepare_server_args` + `resolve_once` import torch, transformers and the kernels (the
# wheel's dependencies weigh gigabytes); the three steps that decide these two values are pure
# Python, so they run here from the wheel's source, in the pipeline's order
# (arg_groups/pipeline.py): parse_cuda_graph_config, handle_gpu_memory_settings, then the
# speculative handler's `max_running_requests is None` rule. What they read of the rest of SGLang
# is stubbed: an 80 GB H100 (get_device_memory_capacity), a text-only model, no MLA, no DP
# attention, CUDA (prefill graphs breakable).

H100_MB = 81559  # what torch reports for an H100 80GB, in MB
_SPEC_HANDLERS = {"NGRAM": "_handle_ngram"}  # the EAGLE family for the others (speculative_hook.py)


def _functions(path: Path, names: tuple[str, ...]) -> list[ast.stmt]:
    """The top-level definitions `names` of one source file, asserted present."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.Assign) and _defines(n, names)]
    assert len(found) == len(names), f"{path.name} changed: found {len(found)} of {names}"
    return found


def _defines(node: ast.stmt, names: tuple[str, ...]) -> bool:
    if isinstance(node, ast.FunctionDef):
        return node.name in names
    return any(isinstance(t, ast.Name) and t.id in names for t in node.targets)  # type: ignore[attr-defined]


class _Record(SimpleNamespace):
    """The resolving view: every field SGLang declares, then what the argv gives."""

    _cuda_graph_config_locked: set[Any]


def _field_defaults(srt: Path) -> dict[str, Any]:
    """{field: default} of every namespace field in arg_groups/fields/*.py (None where the default
    is not a literal)."""
    defaults: dict[str, Any] = {}
    for path in sorted((srt / "arg_groups" / "fields").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
                try:
                    defaults[node.target.id] = ast.literal_eval(node.value)
                except ValueError:
                    defaults[node.target.id] = None
    return defaults


def _argv_values(argv: list[str], kinds: dict[str, str]) -> dict[str, Any]:
    """{field: value} of launch_server flags, typed by the flag list's kinds (switches true)."""
    values: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        flag, kind = argv[i], kinds[argv[i]]
        field = flag[2:].replace("-", "_")
        if kind == "switch":
            values[field], i = True, i + 1
            continue
        words = list(itertools.takewhile(lambda w: not w.startswith("--"), argv[i + 1 :]))
        cast = {"int": int, "float": float}.get(kind, str)
        values[field] = [int(w) for w in words] if kind == "list" else cast(words[0])
        i += 1 + len(words)
    return values


def sglang_resolved(argv: list[str], kinds: dict[str, str], gpu_mem_mb: int = H100_MB) -> dict[str, Any]:
    """max_running_requests and the decode CUDA graph (max_bs, bs) SGLang 0.5.23 resolves for a
    `python -m sglang.launch_server` argv on one GPU of `gpu_mem_mb`."""
    srt = sglang_source("sglang/srt/") / "srt"
    record = _Record(**{**_field_defaults(srt), **_argv_values(argv[3:], kinds)})
    record.speculative_algorithm = (record.speculative_algorithm or "").upper() or None
    graphs_path = srt / "model_executor" / "cuda_graph_config.py"
    module = types.ModuleType("sglang_cuda_graph_config")  # dataclasses look their module up by name
    stubs = {
        module.__name__: module,
        "sglang.srt.runtime_context": SimpleNamespace(get_exec=None),
        "sglang.srt.utils": SimpleNamespace(is_cuda=lambda: True),
    }
    with _modules(stubs):
        exec(compile(graphs_path.read_text(encoding="utf-8"), str(graphs_path), "exec"), module.__dict__)
    graphs = module.__dict__

    def declare(server_args: Any, source: str, **fields: Any) -> None:
        for name, value in fields.items():
            setattr(server_args, name, value)

    namespace: dict[str, Any] = {
        **{k: graphs[k] for k in ("Backend", "Phase", "CudaGraphConfig", "default_cuda_graph_config")},
        "copy": copy, "logger": logging.getLogger("sglang-resolution-test"), "Any": Any,
        "resolving_view": lambda sa: sa, "resolved_view": lambda sa: sa, "declare_resolution": declare,
        "get_device_memory_capacity": lambda device=None: gpu_mem_mb,
        "model_config_of": lambda sa: SimpleNamespace(is_multimodal=False, hf_config=SimpleNamespace()),
        "post_capture_kv_sizing_planned": lambda sa: False, "use_mla_backend": lambda sa: False,
        "attn_dp_enabled_of": lambda view: False, "get_platform": lambda: SimpleNamespace(is_xpu=False),
        "envs": SimpleNamespace(SGLANG_SYMM_MEM_PREALLOC_GB_SIZE=SimpleNamespace(is_set=lambda: True)),
        "_DEFAULT_PP_PREFILL_CUDA_GRAPH_MAX_TOKENS": 8192, "__name__": "sglang_resolution_test",
    }  # fmt: skip
    hooks = srt / "arg_groups"
    taken = _functions(hooks / "cuda_graph_hook.py", (
        "parse_cuda_graph_config", "generate_prefill_cuda_graph_batch_sizes",
        "generate_decode_cuda_graph_batch_sizes", "generate_cpu_graph_batch_sizes",
    )) + _functions(hooks / "memory_hook.py", (
        "handle_gpu_memory_settings", "reserve_for_graph_mb", "reserve_for_deepep_a2a_mb",
    ))  # fmt: skip
    exec(compile(ast.Module(taken, type_ignores=[]), str(hooks), "exec"), namespace)  # SGLang's own code
    imported = {
        **stubs,
        "sglang.srt.arg_groups.cuda_graph_hook": SimpleNamespace(**namespace),
        # Qwen3-VL's multimodal graph widening: not a text model's concern.
        "sglang.srt.arg_groups.model_overrides.qwen3_vl": SimpleNamespace(
            expand_multimodal_decode_graph_to_running_limit=lambda *a: None
        ),
    }
    with _modules(imported):
        namespace["parse_cuda_graph_config"](record)
        namespace["handle_gpu_memory_settings"](record)
    if record.speculative_algorithm:
        handler = _SPEC_HANDLERS.get(record.speculative_algorithm, "_handle_eagle_family")
        (function,) = _functions(hooks / "speculative_hook.py", (handler,))
        # Its `if cfg.max_running_requests is None:` statements, SGLang's own, on this record.
        rule = [
            n for n in function.body
            if isinstance(n, ast.If) and "max_running_requests is None" in ast.unparse(n.test)
        ]  # fmt: skip
        assert rule, f"{handler} no longer sets max_running_requests when it is not given"
        body = [ast.parse("cfg = resolving_view(server_args)").body[0], *rule]
        code = compile(ast.Module(body, type_ignores=[]), handler, "exec")
        exec(code, {**namespace, "server_args": record})
    decode = record.cuda_graph_config.decode
    return {"max_running_requests": record.max_running_requests, "decode_max_bs": decode.max_bs,
            "decode_bs": list(decode.bs)}  # fmt: skip


@contextlib.contextmanager
def _modules(stubs: dict[str, Any]) -> Iterator[None]:
    """`stubs` importable by name for the duration (SGLang's handlers import some lazily)."""
    saved = {name: sys.modules.get(name) for name in stubs}
    sys.modules.update(stubs)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
