"""What the host's modules know of each engine, keyed by its name (stdlib only).

The one module-side place an engine adds to (analysis/engines is the controller's, and a module on a
host cannot import it; tests/unit/test_engines.py holds these keys to its ENGINES):
- probe: the one-token request that proves the model generates (path, body), for specsweep_wait;
- failures: (cause, pattern) of the engine's own log messages, for specsweep_logs, checked with the
  shared patterns of the same cause (a cause of specsweep_logs.CAUSES).
"""

from __future__ import annotations

ENGINES: dict[str, dict] = {
    "llama_cpp": {
        "probe": ("/completion", {"prompt": "Hello", "n_predict": 1, "temperature": 0}),
        # llama.cpp's server (tools/server/server.cpp), model loader (src/llama.cpp, llama-model.cpp)
        # and ggml's buffer allocator (ggml-backend.cpp: "failed to allocate CUDA0 buffer").
        "failures": (
            ("port_bind", r"couldn't bind HTTP server socket"),
            ("out_of_memory", r"failed to allocate"),
            # The file is there and whole, but this build does not know what it holds.
            ("model_unsupported", r"unknown model architecture"),
            ("model_not_found", r"failed to load model"),
        ),
    },
    "sglang": {
        "probe": ("/generate", {"text": "Hello", "sampling_params": {"max_new_tokens": 1, "temperature": 0}}),
        # SGLang 0.5.x's own words (srt/...): its internal ports (server_args.py PortArgs,
        # utils/network.py wait_port_available), the KV pool (model_executor/pool_configurator.py),
        # graph capture (model_executor/runner*, speculative/*cuda_graph_runner.py), its model
        # registry (models/registry.py).
        "failures": (
            ("port_bind", r"Port is already in use|at \d+ is not available in \d+ seconds"),
            ("out_of_memory", r"Not enough memory"),
            ("cuda_graph_capture", r"Capture [\w -]*cuda graph failed|CUDA graph capture failed"),
            ("model_unsupported", r"Model architectures? \[.*\] (is|are) not supported"),
        ),
    },
    "vllm": {
        # vLLM's OpenAI server (vllm/entrypoints/openai/completion/protocol.py: model is optional).
        "probe": ("/v1/completions", {"prompt": "Hello", "max_tokens": 1, "temperature": 0}),
        "failures": (
            # vLLM 0.33.0's own words: the weights (v1/worker/gpu_model_runner.py load_model), the KV
            # cache (v1/core/kv_cache_planning.py _check_enough_kv_cache_memory), the startup budget
            # (v1/worker/utils.py request_memory).
            (
                "out_of_memory",
                r"not enough GPU memory|No available memory for the cache blocks"
                r"|KV cache is needed, which is larger than the available|is less than desired GPU memory",
            ),
            # It refused its --speculative-config: pydantic's header over SpeculativeConfig's own
            # ValueError (vllm/config/speculative.py; analysis.engines.vllm_spec checks it at plan time).
            ("bad_speculative_config", r"validation errors? for SpeculativeConfig"),
            # Its model registry (model_executor/models/registry.py _raise_for_unsupported), the
            # message SGLang's registry took from it.
            ("model_unsupported", r"Model architectures? \[.*\] (is|are) not supported"),
        ),
    },
}
