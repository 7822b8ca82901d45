"""The on-host benchmark client's stream parsing and per-run SpecStats, fed recorded streams.

llama_stream_*.sse were recorded from a real llama.cpp server (xllamacpp, gemma3 270M):
one with ngram-mod speculation (n_max 4), one without. sglang_stream_*.sse are excerpts
written to match sglang 0.5.23's /generate streaming code, not recordings: the finished event's
meta_info as sglang/srt/managers/tokenizer_manager.py (_calculate_spec_decoding_metrics) fills it,
spec_correct_drafts_histogram included.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from analysis.facts.schema import RequestResult, Run, SpecStats, from_dict

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SGLANG_TEXT = "def f(x):\n    return x\n\ndef g(y):\n    return y"


def load_client() -> ModuleType:
    """Import specsweep_bench.py from the role (it is a script, not a package)."""
    path = REPO / "roles/benchmark/files/specsweep_bench.py"
    spec = importlib.util.spec_from_file_location("specsweep_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = load_client()


def lines(name: str) -> list[bytes]:
    """A fixture stream split into lines, as iterating an HTTPResponse yields them."""
    return (FIXTURES / name).read_bytes().splitlines(keepends=True)


def ticking_clock(step: float = 0.01) -> Callable[[], float]:
    """A perf_counter stand-in: 1.0, 1.0 + step, 1.0 + 2 * step, ... per call."""
    ticks = itertools.count()
    return lambda: 1.0 + step * next(ticks)


def consume(name: str, engine: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run a fixture through consume_stream with a clock that ticks 10 ms per read."""
    return bench.consume_stream(engine, lines(name), t_send=0.5, clock=ticking_clock())


def content_chunks(name: str) -> list[str]:
    """The non-empty `content` values of a recorded llama.cpp stream, in order."""
    events = [bench.parse_sse_line(line) for line in lines(name)]
    return [e["content"] for e in events if isinstance(e, dict) and e.get("content")]


def test_client_is_python_3_9_syntax() -> None:
    # GPU hosts run it with their own python3; the project itself targets 3.11.
    source = (REPO / "roles/benchmark/files/specsweep_bench.py").read_text()
    ast.parse(source, feature_version=(3, 9))
    assert "from __future__ import annotations" in source


def test_parse_sse_line_handles_data_done_blank_and_comment_lines() -> None:
    assert bench.parse_sse_line(b'data: {"a": 1}\n') == {"a": 1}
    assert bench.parse_sse_line(b"data: [DONE]\n") is bench.DONE
    assert bench.parse_sse_line(b"\n") is None
    assert bench.parse_sse_line(b": keep-alive\n") is None


def test_parse_sse_line_turns_error_events_and_bad_json_into_stream_errors() -> None:
    with pytest.raises(bench.StreamError, match="slot unavailable"):
        bench.parse_sse_line(b'error: {"message": "slot unavailable"}\n')
    with pytest.raises(bench.StreamError, match="bad JSON"):
        bench.parse_sse_line(b"data: {truncated\n")


def test_llama_speculative_stream_gives_text_timing_and_draft_counters() -> None:
    result, counts = consume("llama_stream_ngram_mod.sse", "llama_cpp")
    chunks = content_chunks("llama_stream_ngram_mod.sse")
    assert counts == {
        "output_tokens": 12,
        "drafted": 4,
        "accepted": 2,
        "verify_steps": 10,
        "input_tokens": 48,
    }
    assert result["output_tokens"] == 12
    assert result["text"] == "".join(chunks) == " d | yes |\n| 5 | e | yes"
    # The clock ticks once per line read; the first content chunk is the first line.
    assert result["ttft_s"] == pytest.approx(0.5)
    assert len(result["itl_s"]) == len(chunks) - 1
    assert all(gap > 0 for gap in result["itl_s"])
    span = sum(result["itl_s"])
    assert result["decode_tps"] == pytest.approx(11 / span)
    assert result["e2e_s"] > result["ttft_s"] + span
    assert result["error"] is None


def test_llama_stream_without_speculation_has_no_draft_counters() -> None:
    result, counts = consume("llama_stream_no_spec.sse", "llama_cpp")
    assert counts == {"output_tokens": 12, "drafted": None, "accepted": None, "verify_steps": None,
                      "input_tokens": 48}  # fmt: skip
    assert result["text"] == " d | yes |\n| 5 | e | yes"
    assert bench.aggregate_spec([counts, counts]) == {
        "drafted": None, "accepted": None, "verify_steps": None,
        "accept_length": None, "accept_rate": None, "accepted_histogram": None,
    }  # fmt: skip


def test_stream_that_ends_before_the_final_event_is_an_error() -> None:
    cut = lines("llama_stream_ngram_mod.sse")[:-2]
    with pytest.raises(bench.StreamError, match="before the final event"):
        bench.consume_stream("llama_cpp", cut, t_send=0.0, clock=ticking_clock())


def test_stream_past_its_deadline_is_a_timeout() -> None:
    with pytest.raises(TimeoutError):
        bench.consume_stream("llama_cpp", lines("llama_stream_ngram_mod.sse"), t_send=0.0,
                             clock=ticking_clock(1.0), deadline=3.5)  # fmt: skip


def test_llama_counters_sum_over_the_run_not_averaged() -> None:
    first = {"output_tokens": 32, "drafted": 24, "accepted": 24, "verify_steps": 8}
    second = {"output_tokens": 32, "drafted": 20, "accepted": 6, "verify_steps": 26}
    spec = bench.aggregate_spec([first, second])
    assert spec == {
        "drafted": 44, "accepted": 30, "verify_steps": 34,
        "accept_length": pytest.approx(64 / 34), "accept_rate": pytest.approx(30 / 44),
        "accepted_histogram": None,  # llama.cpp reports totals only
    }  # fmt: skip


def test_sglang_histograms_sum_position_by_position_over_the_run_and_fit_the_schema() -> None:
    _, first = consume("sglang_stream_eagle.sse", "sglang")  # [0, 1, 2, 2]: 5 steps
    short = {"output_tokens": 4, "drafted": 6, "accepted": 1, "verify_steps": 2, "accepted_histogram": [1, 1]}
    spec = bench.aggregate_spec([first, short, {**short, "accepted_histogram": None}])
    assert spec["accepted_histogram"] == [1, 2, 2, 2]
    assert from_dict(SpecStats, spec).accepted_histogram == [1, 2, 2, 2]


def test_speculation_that_drafted_nothing_has_length_one_and_no_rate() -> None:
    idle = {"output_tokens": 16, "drafted": 0, "accepted": 0, "verify_steps": 16}
    spec = bench.aggregate_spec([idle])
    assert (spec["accept_length"], spec["accept_rate"], spec["drafted"]) == (1.0, None, 0)


# Cumulative: 6 events for 17 tokens (prefill, then one per verify step, several tokens
# each). Incremental: the last two steps were queued and coalesced into one event.
@pytest.mark.parametrize(
    ("name", "events"),
    [("sglang_stream_eagle.sse", 6), ("sglang_stream_eagle_incremental.sse", 5)],
)
def test_sglang_cumulative_and_incremental_streams_give_the_same_text(name: str, events: int) -> None:
    result, counts = consume(name, "sglang")
    assert result["text"] == SGLANG_TEXT
    assert counts == {
        "output_tokens": 17,
        "drafted": 15,
        "accepted": 11,
        "verify_steps": 5,
        "accepted_histogram": [0, 1, 2, 2],
        "input_tokens": 14,
    }
    assert len(result["itl_s"]) == events - 1
    assert result["decode_tps"] == pytest.approx(16 / sum(result["itl_s"]))
    spec = bench.aggregate_spec([counts])
    assert spec["accept_length"] == pytest.approx(3.4)
    assert spec["accept_rate"] == pytest.approx(11 / 15)


def test_sglang_stream_without_speculation_has_no_spec_counters() -> None:
    result, counts = consume("sglang_stream_no_spec.sse", "sglang")
    assert result["text"] == SGLANG_TEXT
    assert counts == {"output_tokens": 17, "drafted": None, "accepted": None, "verify_steps": None,
                      "accepted_histogram": None, "input_tokens": 14}  # fmt: skip
    assert bench.aggregate_spec([counts])["accept_length"] is None


@pytest.mark.parametrize(
    ("name", "message"),
    [("sglang_stream_abort.sse", "aborted: Abort before prefill"),
     ("sglang_stream_error.sse", "longer than the model's context length")],
)  # fmt: skip
def test_sglang_abort_and_error_events_are_stream_errors(name: str, message: str) -> None:
    with pytest.raises(bench.StreamError, match=message):
        consume(name, "sglang")


def test_request_results_and_run_fit_the_fact_schema() -> None:
    result, counts = consume("llama_stream_ngram_mod.sse", "llama_cpp")
    request = {"prompt_id": "table", **result}
    failed = {"prompt_id": "big", "output_tokens": 0, "ttft_s": 0.0, "e2e_s": 0.1,
              "decode_tps": None, "itl_s": [], "text": "", "error": "HTTP 400: too long"}  # fmt: skip
    run = {"repeat": 1, "concurrency": 1, "duration_s": 1.5, "requests": [request, failed],
           "spec": bench.aggregate_spec([counts])}  # fmt: skip
    parsed = from_dict(Run, run)
    assert parsed.requests[0] == RequestResult(**request)
    assert parsed.spec == SpecStats(drafted=4, accepted=2, verify_steps=10, accept_length=1.2,
                                    accept_rate=0.5)  # fmt: skip


# The last chunks of llama-server's /v1/chat/completions stream (build of xllamacpp 2026.10.11549):
# the usage chunk carries `timings` with the drafts.
LLAMA_CHAT = [
    b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"Rain"}}],'
    b'"object":"chat.completion.chunk"}\n',
    b"\n",
    b'data: {"choices":[{"finish_reason":"length","index":0,"delta":{}}],"object":"chat.completion.chunk"}\n',
    b'data: {"choices":[],"usage":{"completion_tokens":12,"prompt_tokens":30,"total_tokens":42},'
    b'"timings":{"prompt_n":30,"predicted_n":12,"draft_n":7,"draft_n_accepted":7}}\n',
    b"data: [DONE]\n",
]
# SGLang 0.5.23's, chunk for chunk as sglang/srt/entrypoints/openai/serving_chat.py
# (_handle_streaming_request) writes it with return_spec_tokens_details and include_usage: the role
# chunk, content chunks and the finish chunk (sse_utils.build_sse_content, msgspec), then the sglext
# chunk of its own (choices [], SglExt dropping its unset fields; SpecTokensDetails from
# openai/utils.spec_tokens_details_from_meta_info, every field), then usage, then [DONE]. The
# histogram is tokenizer_manager._calculate_spec_decoding_metrics' spec_correct_drafts_histogram:
# [k] = verify steps that accepted k drafts (schedule_batch.update_spec_correct_drafts_histogram).
# 5 steps of 3 drafts accepting 1, 2, 2, 3, 3: 11 of 15; 1 + 5 + 11 = 17 tokens.
_HEAD = b'data: {"id":"c1","object":"chat.completion.chunk","created":1764806400,"model":"m",'
SGLANG_CHAT = [
    _HEAD + b'"choices":[{"index":0,"delta":{"reasoning_content":null,"role":"assistant","content":""},'
    b'"logprobs":null,"finish_reason":null,"matched_stop":null}]}\n',
    b"\n",
    _HEAD + b'"choices":[{"index":0,"delta":{"reasoning_content":null,"content":"Rain"},'
    b'"logprobs":null,"finish_reason":null,"matched_stop":null}]}\n',
    b"\n",
    _HEAD + b'"choices":[{"index":0,"delta":{"reasoning_content":null,"content":" falls"},'
    b'"logprobs":null,"finish_reason":null,"matched_stop":null}]}\n',
    b"\n",
    _HEAD + b'"choices":[{"index":0,"delta":{"reasoning_content":null},"logprobs":null,'
    b'"finish_reason":"length","matched_stop":null}]}\n',
    b"\n",
    _HEAD
    + b'"choices":[],"usage":null,"sglext":{"spec_tokens_details":{"spec_accept_rate":0.7333333333333333,'
    b'"spec_accept_length":3.4,"spec_cap_length":0.0,"spec_block_accept_length":0.0,'
    b'"spec_num_correct_drafts":11,"spec_num_proposed_drafts":15,"spec_verify_ct":5,'
    b'"spec_correct_drafts_histogram":[0,1,2,2],"spec_cap_lens_histogram":[]}}}\n',
    b"\n",
    _HEAD + b'"choices":[],"usage":{"prompt_tokens":14,"total_tokens":31,"completion_tokens":17,'
    b'"prompt_tokens_details":null,"reasoning_tokens":0,"completion_tokens_details":null}}\n',
    b"\n",
    b"data: [DONE]\n",
]


@pytest.mark.parametrize(
    ("engine", "stream", "counts"),
    [
        ("llama_cpp", LLAMA_CHAT, {"output_tokens": 12, "drafted": 7, "accepted": 7, "verify_steps": 5,
                                   "input_tokens": 30}),
        ("sglang", SGLANG_CHAT, {"output_tokens": 17, "drafted": 15, "accepted": 11, "verify_steps": 5,
                                 "accepted_histogram": [0, 1, 2, 2], "input_tokens": 14}),
    ],
)  # fmt: skip
def test_a_chat_stream_gives_its_text_and_the_engines_draft_counters(
    engine: str, stream: list, counts: dict
) -> None:
    result, got = bench.consume_stream(engine, stream, t_send=0.0, clock=ticking_clock(), chat=True)
    assert got == counts
    assert result["text"].startswith("Rain") and result["input_tokens"] == counts["input_tokens"]


def test_a_chat_body_asks_for_the_engines_counters_and_no_cached_prefill() -> None:
    llama = bench.chat_body("llama_cpp", [{"role": "user", "content": "q"}], 8)
    sglang = bench.chat_body("sglang", [{"role": "user", "content": "q"}], 8)
    assert (llama["cache_prompt"], llama["ignore_eos"], llama["max_tokens"]) == (False, True, 8)
    assert sglang["return_spec_tokens_details"] is True and "cache_prompt" not in sglang


class Scripted:
    """A client that answers each chat with a numbered text and records what it was sent."""

    def __init__(self, fail_first: bool = False) -> None:
        self.sent: list[tuple[str, list, int]] = []
        self.fail_first = fail_first

    def _answer(self, prompt_id: str) -> tuple[dict, dict | None]:
        error = "HTTP 500" if self.fail_first and len(self.sent) == 1 else None
        text = "" if error else f"answer {len(self.sent)}"
        return {"prompt_id": prompt_id, "text": text, "error": error}, None if error else {"output_tokens": 4}

    def chat(self, prompt_id: str, messages: list, max_tokens: int) -> tuple[dict, dict | None]:
        self.sent.append((prompt_id, [dict(m) for m in messages], max_tokens))
        return self._answer(prompt_id)

    def complete(self, prompt_id: str, prompt: str, max_tokens: int) -> tuple[dict, dict | None]:
        self.sent.append((prompt_id, [{"prompt": prompt}], max_tokens))
        return self._answer(prompt_id)


def test_a_two_turn_record_sends_the_second_turn_after_the_first_answer() -> None:
    client = Scripted()
    record = {"id": "mtbench-81", "messages": [{"role": "user", "content": "one"}], "followups": ["two"]}
    out = bench.make_work(client, 16)(record)
    assert [r["prompt_id"] for r, _ in out] == ["mtbench-81", "mtbench-81/2"]
    assert client.sent[1][1] == [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "answer 1"},
        {"role": "user", "content": "two"},
    ]
    failed = Scripted(fail_first=True)
    assert len(bench.make_work(failed, 16)(record)) == 1  # no answer, no follow-up


def test_a_records_own_length_wins_and_a_private_record_keeps_no_text() -> None:
    client = Scripted()
    work = bench.make_work(client, 16)
    work({"id": "c", "prompt": "def f():", "max_tokens": 5})
    ((result, _),) = work({"id": "line-3", "messages": [{"role": "user", "content": "q"}], "private": True})
    assert [s[2] for s in client.sent] == [5, 16] and result["text"] == ""


def test_records_are_grouped_by_workload_and_hashed_as_the_controller_wrote_them() -> None:
    from analysis.workloads import records

    chat = records.chat("chat", "a", [{"role": "user", "content": "é"}], "pkg==1", ["t2"])
    code = records.completion("code", "b", "def f():", "pkg==2", max_tokens=9)
    groups = bench.by_workload([chat, code, {"id": "x", "prompt": "p"}])
    assert [name for name, _ in groups] == ["chat", "code", None]
    sets = bench.workload_sets(groups)
    assert [(s["name"], s["sha256"], s["output_len"]) for s in sets] == [
        ("chat", records.digest([chat]), "fixed"), ("code", records.digest([code]), "dataset"),
    ]  # fmt: skip
