"""The operator's own traffic file (`-e workload_file=FILE`), read and checked on the controller at plan time.

Three formats, told apart by the file itself:
- OpenAI chat-completions JSONL: `{"messages": [{"role", "content"}, ...], "max_tokens": N}` per line;
- ShareGPT JSON: a list of `{"conversations": [{"from": "human"|"gpt", "value"}, ...]}`;
- SGLang bench_serving's custom JSONL: `{"conversations": [{"content"|"value"}, ...]}` per line (the
  first turn is the prompt, the second the reference reply).
A problem is reported with its line (or entry) and what is wrong, never with the text itself: the
prompts are private, so no message here quotes a value from the file.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from analysis.workloads import records
from analysis.workloads.packages import WorkloadError
from analysis.workloads.records import Record, approx_tokens

NAME = "file"  # the workload's name in facts, tables and --mix
ROLES = ("system", "user", "assistant")
FORMATS = ("openai", "sharegpt", "bench_serving")


def _problem(where: str, what: str) -> WorkloadError:
    return WorkloadError(f"workload_file: {where}: {what}")


def _not_json(exc: ValueError) -> str:
    """json's reason and column, without the document (a JSONDecodeError's str() holds no text either)."""
    return f"not valid JSON ({getattr(exc, 'msg', 'undecodable')} at column {getattr(exc, 'colno', '?')})"


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _openai(doc: dict[str, Any], where: str, source: str, dataset: bool) -> Record:
    """One chat-completions request."""
    messages = doc.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _problem(where, "'messages' must be a non-empty list")
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _problem(where, f"messages[{i}] must be an object with 'role' and 'content'")
        if message.get("role") not in ROLES:
            raise _problem(where, f"messages[{i}].role must be one of {', '.join(ROLES)}")
        if not isinstance(message.get("content"), str):
            raise _problem(where, f"messages[{i}].content must be a string")
    if messages[-1]["role"] != "user":
        raise _problem(where, "the last message must be the user's (the request the model answers)")
    limit = doc.get("max_tokens", doc.get("max_completion_tokens"))
    if limit is not None and not _positive_int(limit):
        raise _problem(where, "'max_tokens' must be a whole number >= 1")
    kept = [{"role": m["role"], "content": m["content"]} for m in messages]
    return records.chat(NAME, where.replace(" ", "-"), kept, source, max_tokens=limit if dataset else None,
                        private=True)  # fmt: skip


def _turns(doc: Any, where: str) -> list[str]:
    """The texts of a ShareGPT / bench_serving conversation, at least a prompt and its reply."""
    convs = doc.get("conversations") if isinstance(doc, dict) else None
    if not isinstance(convs, list) or len(convs) < 2:
        raise _problem(where, "'conversations' must be a list of at least two turns (a prompt and its reply)")
    texts = []
    for i, turn in enumerate(convs[:2]):
        text = turn.get("value", turn.get("content")) if isinstance(turn, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise _problem(where, f"conversations[{i}] must have a non-empty 'value' or 'content' string")
        texts.append(text)
    return texts


def _first_turn(doc: Any, where: str, source: str, dataset: bool) -> Record:
    """The first turn as the request; the reference reply's length when the output length is the data's."""
    prompt, reply = _turns(doc, where)
    return records.chat(NAME, where.replace(" ", "-"), [{"role": "user", "content": prompt}], source,
                        max_tokens=approx_tokens(reply) if dataset else None, private=True)  # fmt: skip


def _jsonl(text: str, dataset: bool) -> tuple[str, list[Record]]:
    """A JSONL file: the first request's keys decide the format, every other line must match it."""
    fmt: str | None = None
    out = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        where = f"line {number}"
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise _problem(where, _not_json(exc)) from None
        if not isinstance(doc, dict):
            raise _problem(where, "expected a JSON object")
        kind = "openai" if "messages" in doc else "bench_serving" if "conversations" in doc else None
        if kind is None:
            expected = "expected 'messages' (OpenAI chat-completions) or 'conversations' (bench_serving)"
            raise _problem(where, expected)
        if fmt is None:
            fmt = kind
        elif kind != fmt:
            raise _problem(where, f"a {kind} request in a {fmt} file (the first request decides the format)")
        read = _openai if kind == "openai" else _first_turn
        out.append(read(doc, where, f"file:{kind}", dataset))
    if fmt is None:
        raise WorkloadError("workload_file: the file holds no request")
    return fmt, out


def _sharegpt(text: str, dataset: bool) -> list[Record]:
    """A ShareGPT JSON list; an entry's problem names its index (the list may be on one line)."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise _problem(f"line {getattr(exc, 'lineno', '?')}", _not_json(exc)) from None
    if not isinstance(doc, list) or not doc:
        raise WorkloadError("workload_file: a ShareGPT file must be a non-empty JSON list")
    return [_first_turn(entry, f"entry {i}", "file:sharegpt", dataset) for i, entry in enumerate(doc)]


def read(path: str, dataset: bool) -> tuple[str, list[Record], str]:
    """(format, records, file sha256) of the operator's traffic file; WorkloadError says what is wrong."""
    file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise WorkloadError(f"workload_file: cannot read {path}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise _problem(f"line {line}", "not UTF-8") from None
    digest = hashlib.sha256(raw).hexdigest()
    if text.lstrip().startswith("["):
        return "sharegpt", _sharegpt(text, dataset), digest
    fmt, out = _jsonl(text, dataset)
    return fmt, out, digest
