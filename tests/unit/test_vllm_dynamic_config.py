"""`recommend --vllm-dynamic-config`: vLLM's Dynamic SD schedule from the per-level answer, checked with
vLLM 0.33.0's own vllm/v1/spec_decode/dynamic/utils.py (tests/vllm_wheel.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from factories import fact, relaunched, run, write_sweep
from vllm_wheel import dynamic_utils

from analysis import cli
from analysis.engines.vllm_spec import problems
from analysis.sweep.config import make, parse_id

# True median decode tok/s per (algorithm, steps) and concurrency; None is the baseline. At 1 s3
# wins, at 4 s2 wins, at 16 the baseline wins (s1 within noise of it).
CURVES: dict[tuple[str, int] | None, dict[int, float]] = {
    None: {1: 100.0, 4: 90.0, 16: 80.0},
    ("EAGLE3", 1): {1: 110.0, 4: 95.0, 16: 79.8},
    ("EAGLE3", 2): {1: 120.0, 4: 105.0, 16: 70.0},
    ("EAGLE3", 3): {1: 130.0, 4: 97.0, 16: 60.0},
}
SPREAD = (0.99, 1.0, 1.01)


def sweep(root: Path, curves: dict[tuple[str, int] | None, dict[int, float]] = CURVES) -> Path:
    """Each config at each of its levels, three repeats."""
    facts = []
    for key, by_level in curves.items():
        runs = [
            run([tps * f], repeat=i, concurrency=c)
            for c, tps in by_level.items()
            for i, f in enumerate(SPREAD)
        ]
        cfg = make(None) if key is None else make(key[1], algorithm=key[0])
        facts.append(fact(cfg, runs))
    return write_sweep(root, relaunched(facts))


def test_the_schedule_passes_vllms_check_and_gives_each_batch_its_levels_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "dynamic.json"
    code = cli.main(
        ["recommend", str(sweep(tmp_path)), "--format", "json", "--vllm-dynamic-config", str(out)]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f"wrote {out}" in captured.err
    answer = {
        int(c): parse_id(r["config"])["steps"] or 0
        for c, r in json.loads(captured.out)["by_concurrency"].items()
    }
    assert sorted(set(answer.values())) == [0, 2, 3], answer  # the curves make three different answers
    written = json.loads(out.read_text())
    schedule = written["num_speculative_tokens_per_batch_size"]
    utils = dynamic_utils()
    utils["validate_and_normalize_dynamic_sd_schedule"](schedule)
    dense = utils["build_dynamic_sd_schedule_lookup"](schedule, 64, written["num_speculative_tokens"])
    # As SGLang routes a batch: to the largest measured level at or below it, the first below it.
    want = [answer[max([c for c in answer if c <= b], default=min(answer))] for b in range(1, 65)]
    assert dense[1:] == want, (schedule, dense)
    assert problems({"method": "eagle3", "model": "org/eagle3-head", **written}) == []


def test_the_adaptive_and_the_dynamic_file_are_written_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sglang, vllm = tmp_path / "adaptive.json", tmp_path / "dynamic.json"
    argv = [
        "recommend",
        str(sweep(tmp_path)),
        "--adaptive-config",
        str(sglang),
        "--vllm-dynamic-config",
        str(vllm),
    ]
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert "candidate_steps" in json.loads(sglang.read_text())["1"]
    assert "num_speculative_tokens_per_batch_size" in json.loads(vllm.read_text())


def test_one_schedule_runs_one_method(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """EAGLE-3 s3 is the answer at 1, n-gram s2 at 4: vLLM's schedule cannot switch methods."""
    curves = {
        None: {1: 100.0, 4: 90.0},
        ("EAGLE3", 3): {1: 130.0, 4: 80.0},
        ("NGRAM", 2): {1: 90.0, 4: 120.0},
    }
    out = tmp_path / "dynamic.json"
    assert cli.main(["recommend", str(sweep(tmp_path, curves)), "--vllm-dynamic-config", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--vllm-dynamic-config: a Dynamic SD schedule runs one speculative method" in err
    assert "EAGLE3 at 1" in err and "NGRAM at 4" in err
    assert not out.exists()


def test_where_the_baseline_wins_everywhere_no_file_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    curves = {None: {1: 100.0, 4: 90.0}, ("EAGLE3", 2): {1: 80.0, 4: 70.0}}
    out = tmp_path / "dynamic.json"
    assert cli.main(["recommend", str(sweep(tmp_path, curves)), "--vllm-dynamic-config", str(out)]) == 2
    assert "the baseline wins at every level" in capsys.readouterr().err
    assert not out.exists()
