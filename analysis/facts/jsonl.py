"""Read SGLang's own benchmark JSONL (`bench_serving`, `bench_one_batch_server`) as run rows.

Where the config comes from: the file lives where a fact would, and its name is the config id,
optionally followed by the tool's name:

    <sweep_id>/<host>/<config_id>[.bench_serving|.bench_one_batch_server].jsonl
    e.g. kimi-nightly/gpu-node-1/s2-k1-d3+nccl_ll.bench_serving.jsonl

`<config_id>` is the sweep's own naming (`baseline`, `s<steps>`, `s<steps>-k<topk>-d<draft>`, each
optionally `+<env_profile>`), read back by analysis.sweep.config.parse_id.
`--jsonl-sweep/--jsonl-host/--jsonl-config/--jsonl-model` override the path for files kept
elsewhere. Without the tool's name, each line's fields tell which it is.
Each line is one repeat (numbered in file order per concurrency); a bad line is reported with its
line number and skipped, the good lines are kept.

Mapping onto the fact columns (so the tables compare like with like):
- decode_tps: bench_serving 1000 / median_tpot_ms, which is the specsweep client's per-request
  definition ((tokens - 1) / decode span); without TPOT, output_throughput / max_concurrency.
  bench_one_batch_server: output_throughput / batch_size (per request, like decode_tps).
- concurrency: max_concurrency (bench_serving), batch_size (bench_one_batch_server).
- accept_length: accept_length (bench_serving), acc_length (bench_one_batch_server).
- the other figures bench_serving has: where the metric table (analysis.metrics) names its field,
  a `_ms` field in seconds for a figure in seconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis import metrics
from analysis.engines import sglang
from analysis.facts.rows import Row
from analysis.sweep.config import parse_id

KINDS = ("bench_serving", "bench_one_batch_server")
# (column, bench_serving's field, factor): the figures bench_serving reports as they are.
SERVING = [
    (m.name, m.bench_serving, 0.001 if m.unit == "s" and m.bench_serving.endswith("_ms") else 1.0)
    for m in metrics.ROWS
    if m.bench_serving
]


@dataclass(frozen=True)
class Labels:
    """What the path cannot tell (or tells wrongly): overrides from the command line."""

    sweep_id: str | None = None
    host: str | None = None
    config_id: str | None = None
    model: str | None = None


def _num(line: dict[str, Any], key: str) -> float | None:
    """A numeric field, or None when absent, null or not a number."""
    value = line.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _ms(line: dict[str, Any], key: str) -> float | None:
    """A millisecond field in seconds."""
    value = _num(line, key)
    return None if value is None else value / 1000.0


def config_columns(config_id: str) -> Row:
    """Config columns parsed from a sweep config id; ValueError when it is not one."""
    try:
        fields = parse_id(config_id)
    except ValueError as exc:
        raise ValueError(f"{exc}; name the file so or pass --jsonl-config") from exc
    return {"config_id": fields.pop("id"), **fields}


def kind_of(path: Path, line: dict[str, Any]) -> str | None:
    """Which tool wrote this line: from the file name, else from the fields it has."""
    for kind in KINDS:
        if path.name.endswith(f".{kind}.jsonl"):
            return kind
    if "max_concurrency" in line or "median_tpot_ms" in line:
        return "bench_serving"
    if "batch_size" in line and "latency" in line:
        return "bench_one_batch_server"
    return None


def _serving(line: dict[str, Any]) -> Row:
    """Run columns of one bench_serving result line."""
    conc = line.get("max_concurrency")
    if not isinstance(conc, int) or conc < 1:
        raise ValueError("max_concurrency missing: cannot tell which concurrency this run measured")
    tpot = _num(line, "median_tpot_ms")
    throughput = _num(line, "output_throughput")
    tps = 1000.0 / tpot if tpot else (throughput / conc if throughput is not None else None)
    errors = [e for e in line.get("errors") or [] if e]
    completed = int(_num(line, "completed") or 0)
    figures = {name: None if (v := _num(line, key)) is None else v * factor for name, key, factor in SERVING}
    return figures | {
        "concurrency": conc,
        "duration_s": _num(line, "duration"),
        "n_requests": completed + len(errors),
        "n_errors": len(errors),
        "decode_tps": tps,
        "message": errors[0] if errors else None,
    }


def _one_batch(line: dict[str, Any]) -> Row:
    """Run columns of one bench_one_batch_server result line."""
    batch = line.get("batch_size")
    if not isinstance(batch, int) or batch < 1:
        raise ValueError("batch_size missing: cannot tell which concurrency this run measured")
    throughput = _num(line, "output_throughput")
    output_len = line.get("output_len")
    return {
        "concurrency": batch,
        "duration_s": _num(line, "latency"),
        "n_requests": batch,
        "n_errors": 0,
        "decode_tps": None if throughput is None else throughput / batch,
        "ttft_s": _num(line, "last_ttft"),
        "tpot_s": _ms(line, "itl_ms"),  # one batch decoding together: its step time per token
        "output_tokens": batch * output_len if isinstance(output_len, int) else None,
        "accept_length": _num(line, "acc_length"),
    }


def _where(path: Path, labels: Labels) -> Row:
    """Sweep, host, engine, model and config of a JSONL file, from its path and the overrides."""
    stem = path.name.removesuffix(".jsonl")
    for kind in KINDS:
        stem = stem.removesuffix(f".{kind}")
    return {
        "sweep_id": labels.sweep_id or path.parent.parent.name,
        "host": labels.host or path.parent.name,
        "engine": sglang.NAME,  # the records of SGLang's own bench_serving
        "engine_version": None,
        "model": labels.model,
        "status": "ok",
        "started_at": path.stat().st_mtime,
    } | config_columns(labels.config_id or stem)


def jsonl_rows(
    path: Path, labels: Labels = Labels(), name: str | None = None
) -> tuple[list[Row], list[tuple[str, str]]]:
    """Run rows of one JSONL file (called `name` in them) and (file:line, reason) per bad line."""
    name = str(path) if name is None else name
    base = {"path": name} | _where(path, labels)
    rows: list[Row] = []
    problems: list[tuple[str, str]] = []
    repeats: dict[int, int] = {}
    text = path.read_text(encoding="utf-8")
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
            if not isinstance(line, dict):
                raise ValueError("expected a JSON object per line")
            kind = kind_of(path, line)
            if kind is None:
                raise ValueError("neither bench_serving nor bench_one_batch_server fields")
            numbers = _serving(line) if kind == "bench_serving" else _one_batch(line)
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            problems.append((f"{name}:{number}", f"skipped line: {exc}"))
            continue
        conc = numbers["concurrency"]
        repeat = repeats[conc] = repeats.get(conc, -1) + 1
        run_ok = numbers["n_requests"] > 0 and numbers["n_errors"] == 0 and numbers["decode_tps"] is not None
        model = base["model"] or line.get("model_id") or line.get("model") or line.get("tokenizer_id")
        rows.append(
            base
            | numbers
            | {
                "source": kind,
                "model": str(model or "unknown"),
                "run_index": len(rows),
                "repeat": repeat,
                "run_ok": run_ok,
                "failed": not run_ok,
                "cause": None if run_ok else "request_error",
                "launch_index": 1,  # a JSONL file is one server's output
                "interfered": False,  # bench_serving records nothing of what else ran
            }
        )
    return rows, problems
