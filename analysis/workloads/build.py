"""A sweep's workloads, built on the controller at plan time: one records file the hosts receive.

`build` reads the shipped sets and the operator's file, samples each with the sweep's seed, writes
every record to one JSONL file in the controller's cache (content-addressed, readable by its owner
only: it may hold the operator's prompts) and describes each set by counts, approximate input
lengths and a hash, never by its text; that description is what the plan and the report show.
"""

from __future__ import annotations

import os
import random
import statistics
from collections.abc import Mapping
from typing import Any

from analysis.workloads import packages, records, shipped, traffic
from analysis.workloads.records import Record


def sample(items: list[Record], count: int, seed: int) -> list[Record]:
    """`count` records drawn with `seed` (all of them, in order, for 0 or more than there are)."""
    if count <= 0 or count >= len(items):
        return items
    return random.Random(seed).sample(items, count)


def describe(name: str, items: list[Record], output_len: str) -> dict[str, Any]:
    """A set as the plan and the fact name it: where it came from, how many, how long, its hash."""
    lengths = [records.approx_tokens(records.input_text(r)) for r in items]
    return {
        "name": name,
        "source": items[0]["set"],
        "kind": "chat" if "messages" in items[0] else "completion",
        "records": len(items),
        "turns": sum(1 + len(r.get("followups", [])) for r in items),
        "sha256": records.digest(items),
        "output_len": output_len,
        "input_tokens_approx": {"median": statistics.median(lengths), "max": max(lengths)},
    }


def _write(items: list[Record]) -> str:
    """The records file in the cache, named by its content: the same sweep twice writes it once."""
    name = f"workloads-{records.digest(items)[:16]}.jsonl"
    with packages.locked("records") as folder:
        private = folder / "records"
        private.mkdir(mode=0o700, exist_ok=True)
        path = private / name
        if not path.is_file():
            tmp = path.with_name(f".{name}.{os.getpid()}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.writelines(records.line(r) + "\n" for r in items)
            os.replace(tmp, path)
    return str(path)


def build(values: Mapping[str, Any], context_tokens: int | None) -> dict[str, Any] | None:
    """{records: controller path, sets: [...]} for the request's workloads; None for the one legacy
    prompt set; WorkloadError (naming the setting) when a set cannot be built."""
    names, file = list(values.get("workloads") or []), values.get("workload_file") or ""
    if not names and not file:
        return None
    dataset = values.get("output_len") == "dataset"
    opts = shipped.Options(dataset, int(values.get("max_tokens") or 96), context_tokens)
    count, seed = int(values.get("workload_records") or 0), int(values.get("seed") or 0)
    chosen: dict[str, list[Record]] = {}
    for name in names:
        chosen[name] = sample(shipped.read(name, opts), count, seed)
    if file:
        _, items, _ = traffic.read(file, dataset)
        chosen[traffic.NAME] = sample(items, count, seed)
    output_len = "dataset" if dataset else "fixed"
    every = [r for items in chosen.values() for r in items]
    return {"records": _write(every), "sets": [describe(n, items, output_len) for n, items in chosen.items()]}
