"""A workload's records: what the on-host client sends, one JSON object per line of its records file.

A completion record has `prompt` (raw completion: the workload is itself a completion, code); a chat
record has `messages` (sent to /v1/chat/completions, the model's own template) and `followups`, user
turns sent one by one after each answer (MT-Bench's second turn). `max_tokens` is set only when the
output length comes from the data (`-e output_len=dataset`); `private` marks the operator's traffic,
whose response texts the client does not keep.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from typing import Any

Record = dict[str, Any]
CHARS_PER_TOKEN = 4  # a rough English average: the controller has no tokenizer of the served model


def approx_tokens(text: str) -> int:
    """Tokens a text is about (chars / 4, at least 1): for tiers and reference lengths, never for figures."""
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


def completion(workload: str, rid: str, prompt: str, source: str, max_tokens: int | None = None) -> Record:
    """A raw-completion record."""
    record: Record = {"workload": workload, "id": rid, "prompt": prompt, "set": source}
    return record if max_tokens is None else {**record, "max_tokens": max_tokens}


def chat(
    workload: str,
    rid: str,
    messages: list[dict[str, str]],
    source: str,
    followups: Iterable[str] = (),
    max_tokens: int | None = None,
    private: bool = False,
) -> Record:
    """A chat record: the conversation so far, and user turns to send after each answer."""
    record: Record = {"workload": workload, "id": rid, "messages": messages, "followups": list(followups),
                      "set": source}  # fmt: skip
    if max_tokens is not None:
        record["max_tokens"] = max_tokens
    return {**record, "private": True} if private else record


def line(record: Record) -> str:
    """A record as its line in the records file (sorted keys: the same records hash the same)."""
    return json.dumps(record, sort_keys=True, ensure_ascii=False)


def digest(records: Iterable[Record]) -> str:
    """sha256 of the records' lines: names the prompts used in the fact and the plan."""
    h = hashlib.sha256()
    for record in records:
        h.update((line(record) + "\n").encode())
    return h.hexdigest()


def input_text(record: Record) -> str:
    """Everything a record sends as input (for its approximate length)."""
    if "prompt" in record:
        return record["prompt"]
    return "".join(m["content"] for m in record["messages"]) + "".join(record.get("followups", []))
