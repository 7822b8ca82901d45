"""What the benchmark client and the server-load probe know of each engine, keyed by its name.

Standard library only, Python 3.9+: copied beside specsweep_bench.py and specsweep_serverload.py,
which import it. The one host-side place of the benchmark an engine adds to (analysis/engines is the
controller's; tests/unit/test_engines.py holds ENGINES' keys to its list). Per engine: the raw
completion request and its stream (the request adapter and the per-request speculative counters),
what the chat request adds, the server's facts, the running and queued gauges of its /metrics
(specsweep_serverload) and, for an engine that counts speculation only server-wide, those counters.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

Doc = dict[str, Any]
GetJson = Callable[[str], Any]  # GET a path as JSON, None on any failure


class StreamError(Exception):
    """The server reported an error in the stream, or the stream ended early."""


def integer(value: Any) -> int | None:
    """`value` if it is an integer (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def integers(value: Any) -> list[int] | None:
    """`value` if it is a list of integers, else None."""
    ok = isinstance(value, list) and all(integer(v) is not None for v in value)
    return value if ok else None


def check_error(event: Doc) -> None:
    """Raise StreamError for an engine's {"error": ...} event."""
    err = event.get("error")
    if err is not None:
        msg = err.get("message", err) if isinstance(err, dict) else err
        raise StreamError(str(msg)[:500])


def llama_body(prompt: str, max_tokens: int) -> Doc:
    """llama.cpp /completion body: greedy, fixed length, streamed."""
    # cache_prompt false: every repeat pays the same prefill, so TTFT stays comparable.
    return {"prompt": prompt, "n_predict": max_tokens, "temperature": 0, "ignore_eos": True,
            "cache_prompt": False, "stream": True}  # fmt: skip


def llama_feed(event: Doc, state: Doc) -> tuple[str, Doc | None]:
    """llama.cpp event -> (new text, counters if this is the final `stop` event)."""
    check_error(event)
    delta = event.get("content") or ""
    if not event.get("stop"):
        return delta, None
    timings = event.get("timings") or {}
    tokens = integer(timings.get("predicted_n"))
    tokens = tokens if tokens is not None else integer(event.get("tokens_predicted"))
    return delta, llama_counts(timings, tokens)


def llama_counts(timings: Doc, tokens: int | None) -> Doc:
    """Counters from llama.cpp's `timings` (native and chat endpoints alike)."""
    accepted = integer(timings.get("draft_n_accepted"))
    # Each decode step yields one token plus the drafts it accepted.
    steps = None if tokens is None or accepted is None else tokens - accepted
    return {"output_tokens": tokens, "drafted": integer(timings.get("draft_n")), "accepted": accepted,
            "verify_steps": steps, "input_tokens": integer(timings.get("prompt_n"))}  # fmt: skip


def sglang_body(prompt: str, max_tokens: int) -> Doc:
    """SGLang /generate body: greedy, fixed length, streamed."""
    params = {"max_new_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
    return {"text": prompt, "sampling_params": params, "stream": True}


def sglang_feed(event: Doc, state: Doc) -> tuple[str, Doc | None]:
    """SGLang event -> (new text, counters if this is the finished event)."""
    check_error(event)
    meta = event.get("meta_info") or {}
    text, seen = event.get("text") or "", state.get("text", "")
    ids, total = event.get("output_ids"), integer(meta.get("completion_tokens"))
    # Text is cumulative unless the server runs --incremental-streaming-output; then
    # output_ids is a delta as well, shorter than the cumulative completion_tokens.
    cumulative = text.startswith(seen)
    if isinstance(ids, list) and total is not None:
        cumulative = len(ids) == total
    delta = text[len(seen) :] if cumulative else text
    state["text"] = seen + delta
    reason = meta.get("finish_reason")
    if reason is None:
        return delta, None
    if isinstance(reason, dict) and reason.get("type") == "abort":
        raise StreamError(f"aborted: {reason.get('message', reason)}"[:500])
    # Present only with speculation (and not in every SGLang version): absent -> None.
    return delta, {
        "output_tokens": total,
        "drafted": integer(meta.get("spec_num_proposed_drafts")),
        "accepted": integer(meta.get("spec_num_correct_drafts")),
        "verify_steps": integer(meta.get("spec_verify_ct")),
        "accepted_histogram": integers(meta.get("spec_correct_drafts_histogram")),
        "input_tokens": integer(meta.get("prompt_tokens")),
    }


def openai_body(prompt: str, max_tokens: int) -> Doc:
    """vLLM /v1/completions body (vllm/entrypoints/openai/completion/protocol.py CompletionRequest):
    greedy, fixed length (ignore_eos), streamed, usage on the last chunk."""
    return {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}  # fmt: skip


def openai_feed(event: Doc, state: Doc) -> tuple[str, Doc | None]:
    """OpenAI completion chunk -> (new text, counters once the usage chunk came). vLLM streams no
    speculative counters per request: its run figures are the server's own (specsweep_serverload)."""
    check_error(event)
    choices = event.get("choices") or []
    first = choices[0] if choices and isinstance(choices[0], dict) else {}
    usage = event.get("usage") or {}
    if not usage:
        return first.get("text") or "", None
    return first.get("text") or "", {
        "output_tokens": integer(usage.get("completion_tokens")),
        "input_tokens": integer(usage.get("prompt_tokens")),
        "drafted": None, "accepted": None, "verify_steps": None,
    }  # fmt: skip


def llama_info(get_json: GetJson) -> tuple[str | None, Doc]:
    """(engine_version, a few server facts) from llama-server's /props and /slots; never raises."""
    props = get_json("/props")
    props = props if isinstance(props, dict) else {}
    keys = ("build_info", "model_path", "total_slots")
    info = {k: props[k] for k in keys if k in props}
    info["n_ctx"] = (props.get("default_generation_settings") or {}).get("n_ctx")
    # /props shows default params ("speculative.types": "none" even with a draft);
    # /slots has the slot's real speculative flag and its last request's params.
    slots = get_json("/slots")
    if isinstance(slots, list) and slots and isinstance(slots[0], dict):
        info["speculative"] = slots[0].get("speculative")
        params = slots[0].get("params") or {}
        info.update({k: v for k, v in params.items() if k.startswith("speculative")})
    version = props.get("build_info")
    if version and "unknown" in version:
        version = None  # xllamacpp's build says "b0-unknown": the role's pin is better
    return (None if version is None else str(version)), info


def sglang_info(get_json: GetJson) -> tuple[str | None, Doc]:
    """(engine_version, a few server facts) from SGLang's /server_info; never raises."""
    return sglang_server_facts(get_json("/server_info") or get_json("/get_server_info"))


def sglang_server_facts(data: Any) -> tuple[str | None, Doc]:
    """(engine_version, a few server facts) from SGLang's /server_info document; never raises."""
    data = data if isinstance(data, dict) else {}
    keys = ("version", "tp_size", "model_path")
    info = {k: v for k, v in data.items() if k in keys or k.startswith("speculative_")}
    states = data.get("internal_states")
    if isinstance(states, list) and states and isinstance(states[0], dict):
        for key in ("avg_spec_accept_length", "step_time_dict"):
            if key in states[0]:
                info[key] = states[0][key]
    version = data.get("version")
    return (None if version is None else str(version)), info


def vllm_info(get_json: GetJson) -> tuple[str | None, Doc]:
    """(engine_version, a few server facts) from vLLM's /version and /v1/models; never raises."""
    # GET /version (vllm/entrypoints/serve/instrumentator/basic.py show_version): {"version": ...}
    found = get_json("/version")
    version = found.get("version") if isinstance(found, dict) else None
    models = get_json("/v1/models")
    data = models.get("data") if isinstance(models, dict) else None
    first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
    info = {k: first[k] for k in ("id", "root", "max_model_len") if k in first}
    return (None if version is None else str(version)), info


class Engine(NamedTuple):
    """One engine as the host-side benchmark sees it."""

    path: str  # the raw completion endpoint
    body: Callable[[str, int], Doc]  # (prompt, max_tokens) -> its request body
    feed: Callable[[Doc, Doc], tuple[str, Doc | None]]  # (event, state) -> (text, final counters)
    info: Callable[[GetJson], tuple[str | None, Doc]]  # (engine_version, a few server facts)
    gauges: tuple[str, str]  # (running, queued) gauge names of its /metrics
    chat: Doc  # what its chat body adds (its per-request counters asked for, ...)
    final_is_last: bool = False  # the raw stream's final event is its last (no [DONE] follows)
    # (verify steps, drafted, accepted, accepted by draft position) counters of its /metrics, for an
    # engine that counts speculation only server-wide; None: its stream has them per request.
    spec_counters: tuple[str, str, str, str] | None = None


# Where the gauges come from, GET /metrics on the server's port:
# - llama.cpp (llama-server --metrics): the unlabelled gauges `llamacpp:requests_processing` (slots
#   processing a request) and `llamacpp:requests_deferred` (requests waiting for a free slot), the
#   /metrics handler of tools/server/server-context.cpp (server.cpp in older trees; documented in
#   tools/server/README.md, "GET /metrics"); answered by the server loop, so current to a step.
# - SGLang (--enable-metrics): the gauges `sglang:num_running_reqs` ("The number of running
#   requests.") and `sglang:num_queue_reqs` ("The number of requests in the waiting queue.") of
#   SchedulerMetricsCollector (sglang/srt/observability/metrics_collector.py, 0.5.23). One series per
#   scheduler that reports (attention-TP rank 0 of each data-parallel group, labels tp_rank and
#   dp_rank), so the total is their sum; with priority scheduling the total is under priority="" and a
#   breakdown under priority="<n>" (_log_gauge_queue_count), left out. The scheduler refreshes
#   them at each prefill batch and every --decode-log-interval (40) decode batches
#   (managers/scheduler_components/metrics_reporter.py).
# - vLLM (always on): the gauges `vllm:num_requests_running` ("Number of requests in model execution
#   batches.") and `vllm:num_requests_waiting` ("Number of requests waiting to be processed.") of
#   PrometheusStatLogger (vllm/v1/metrics/loggers.py, 0.33.0), labels model_name and engine (one series
#   per engine core: data parallelism sums them). vLLM gives no per-request speculative counters in
#   its stream, so its run's SpecStats come from /metrics too: the counters SpecDecodingProm defines
#   (vllm/v1/spec_decode/metrics.py, 0.33.0): `vllm:spec_decode_num_drafts` (verify steps that had
#   drafts), `..._num_draft_tokens`, `..._num_accepted_tokens` and `..._num_accepted_tokens_per_pos`
#   (label position 0..K-1), exposed by prometheus_client with the counter suffix `_total`.
ENGINES = {
    "llama_cpp": Engine(
        "/completion", llama_body, llama_feed, llama_info,
        ("llamacpp:requests_processing", "llamacpp:requests_deferred"),
        chat={"cache_prompt": False}, final_is_last=True,
    ),
    "sglang": Engine(
        "/generate", sglang_body, sglang_feed, sglang_info,
        ("sglang:num_running_reqs", "sglang:num_queue_reqs"),
        chat={"return_spec_tokens_details": True},
    ),
    "vllm": Engine(
        "/v1/completions", openai_body, openai_feed, vllm_info,
        ("vllm:num_requests_running", "vllm:num_requests_waiting"),
        chat={},
        spec_counters=("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
                       "vllm:spec_decode_num_accepted_tokens_total",
                       "vllm:spec_decode_num_accepted_tokens_per_pos_total"),
    ),
}  # fmt: skip
