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
        "failures": (),
    },
    "sglang": {
        "probe": ("/generate", {"text": "Hello", "sampling_params": {"max_new_tokens": 1, "temperature": 0}}),
        "failures": (),
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
        ),
    },
}
