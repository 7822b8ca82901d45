"""SGLang bench_serving / bench_one_batch_server JSONL files in the same tables as facts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from factories import config, fact, run, write_sweep

from analysis.facts.jsonl import Labels, config_columns
from analysis.facts.load import load_sweeps
from analysis.report.cli import build_tables
from analysis.report.render import render

REPO = Path(__file__).resolve().parents[2]


def serving_line(tpot_ms: float, accept: float | None = None, concurrency: int = 1) -> dict:
    """One bench_serving result line, with the fields SGLang writes (a subset); its duration is its
    tokens at that TPOT, so that its throughput ranks as its decode tok/s does."""
    return {
        "backend": "sglang", "max_concurrency": concurrency,
        "duration": 16384 * tpot_ms / 1000.0 / concurrency, "completed": 64,
        "total_output_tokens": 16384, "output_throughput": 540.0, "median_ttft_ms": 210.0,
        "p99_ttft_ms": 480.0, "median_tpot_ms": tpot_ms, "median_itl_ms": tpot_ms * 0.9,
        "p99_itl_ms": tpot_ms * 3, "accept_length": accept, "model_id": "Kimi-K2.5",
    }  # fmt: skip


def write_lines(path: Path, lines: list[object], tail: str = "") -> Path:
    """Write JSON lines (plus raw trailing text, e.g. a truncated line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + tail, encoding="utf-8")
    return path


def test_bench_serving_lines_become_repeats_compared_to_the_baseline(tmp_path: Path) -> None:
    host = tmp_path / "kimi-night" / "gpu-a"
    write_lines(host / "baseline.bench_serving.jsonl", [serving_line(t) for t in (11.26, 11.30, 11.22)])
    spec = [serving_line(t, accept=2.6) for t in (10.64, 10.60, 10.68)]
    write_lines(host / "s2-k1-d3.bench_serving.jsonl", spec)
    result = load_sweeps([tmp_path / "kimi-night"])
    assert result.problems == []
    runs = result.runs
    assert set(runs["source"]) == {"bench_serving"} and runs["repeat"].tolist() == [0, 1, 2, 0, 1, 2]
    step = build_tables(result).step.set_index("config")
    # decode tok/s = 1000 / median TPOT: the specsweep client's per-request definition.
    assert step.loc["baseline", "decode_tps"] == pytest.approx(1000 / 11.26)
    assert step.loc["s2-k1-d3", "speedup_pct"] == pytest.approx((11.26 / 10.64 - 1) * 100)
    assert step.loc["s2-k1-d3", ["steps", "topk", "draft_tokens"]].tolist() == [2, 1, 3]
    assert step.loc["s2-k1-d3", "accept_length"] == pytest.approx(2.6)
    assert step.loc["s2-k1-d3", "ttft_p99_ms"] == pytest.approx(480.0)
    assert step.loc["s2-k1-d3", "tpot_p50_ms"] == pytest.approx(10.64)
    assert step.loc["s2-k1-d3", "model"] == "Kimi-K2.5" and step.loc["s2-k1-d3", "host"] == "gpu-a"
    assert pd.notna(step.loc["s2-k1-d3", "speedup_ci_lo"])


def test_bench_one_batch_server_is_recognised_by_its_fields(tmp_path: Path) -> None:
    line = {"run_name": "default", "batch_size": 4, "input_len": 1024, "output_len": 256, "latency": 3.1,
            "output_throughput": 372.0, "last_ttft": 0.35, "acc_length": 2.1}  # fmt: skip
    write_lines(tmp_path / "sw" / "gpu-a" / "s3.jsonl", [line, line | {"output_throughput": 380.0}])
    runs = load_sweeps([tmp_path / "sw"]).runs
    assert runs["source"].tolist() == ["bench_one_batch_server"] * 2
    assert runs["concurrency"].tolist() == [4, 4]
    assert runs["decode_tps"].tolist() == [pytest.approx(93.0), pytest.approx(95.0)]
    assert runs["accept_length"].tolist() == [2.1, 2.1] and runs["ttft_s"].tolist() == [0.35, 0.35]


def test_truncated_and_bad_lines_are_reported_by_name_and_line_and_skipped(tmp_path: Path) -> None:
    host = tmp_path / "sw" / "gpu-a"
    write_lines(
        host / "s2.bench_serving.jsonl", [serving_line(10.0), [1, 2]], tail='{"max_concurrency": 1, "dur'
    )
    write_lines(host / "oops.jsonl", [serving_line(10.0)])
    write_lines(host / "baseline.jsonl", [{"unrelated": True}])
    result = load_sweeps([tmp_path / "sw"])
    problems = {p.name: reason for p, reason in result.problems}
    assert set(problems) == {
        "s2.bench_serving.jsonl:2",
        "s2.bench_serving.jsonl:3",
        "oops.jsonl",
        "baseline.jsonl:1",
    }
    assert "not valid JSON" not in problems["s2.bench_serving.jsonl:2"]
    assert (
        "Expecting" in problems["s2.bench_serving.jsonl:3"]
        or "Unterminated" in problems["s2.bench_serving.jsonl:3"]
    )
    assert "--jsonl-config" in problems["oops.jsonl"]
    assert result.runs["config_id"].astype(str).tolist() == ["s2"], "the good line is kept"


def test_labels_override_the_path_convention(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "downloads" / "run.jsonl", [serving_line(10.0), serving_line(10.2)])
    labels = Labels(sweep_id="manual", host="gpu-z", config_id="s4-k2-d8", model="Kimi")
    runs = load_sweeps([path], labels).runs
    assert set(runs["sweep_id"]) == {"manual"} and set(runs["host"]) == {"gpu-z"}
    assert set(runs["config_id"]) == {"s4-k2-d8"} and set(runs["model"]) == {"Kimi"}
    argv = [
        sys.executable,
        "-m",
        "analysis",
        "report",
        str(path),
        "--jsonl-config",
        "s4-k2-d8",
        "--jsonl-host",
        "gpu-z",
    ]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "host gpu-z" in proc.stdout and "s4-k2-d8" in proc.stdout, proc.stdout


def test_config_ids_parse_as_the_sweep_names_them() -> None:
    assert config_columns("baseline+nccl")["env_profile"] == "nccl"
    assert not config_columns("baseline")["speculative"]
    parsed = config_columns("s5-k4-d8+nccl_ll_ring")
    assert (parsed["steps"], parsed["topk"], parsed["draft_tokens"], parsed["env_profile"]) == (
        5,
        4,
        8,
        "nccl_ll_ring",
    )
    with pytest.raises(ValueError, match="not baseline"):
        config_columns("eagle-fast")


def test_a_fact_baseline_and_a_jsonl_config_share_one_table(tmp_path: Path) -> None:
    baseline = fact(config(), [run([90.0], repeat=0), run([91.0], repeat=1)], sweep_id="sw", host="gpu-a")
    sweep = write_sweep(tmp_path, [baseline])
    lines = [serving_line(10.0, 2.5) | {"model_id": "Kimi-K2.5"}, serving_line(10.1, 2.5)]
    write_lines(sweep / "gpu-a" / "s2.bench_serving.jsonl", lines)
    step = build_tables(load_sweeps([sweep])).step.set_index("config")
    assert step["source"].to_dict() == {"baseline": "specsweep", "s2": "bench_serving"}
    assert step.loc["s2", "speedup_pct"] == pytest.approx(((1000 / 10 + 1000 / 10.1) / 2 / 90.5 - 1) * 100)
    text = render(build_tables(load_sweeps([sweep])), "text")
    assert "+10.0%" in text and "2.50" in text, text
