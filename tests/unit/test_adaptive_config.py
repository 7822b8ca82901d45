"""`recommend --adaptive-config`: the file SGLang 0.5.23 reads, checked with SGLang's own loader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from factories import config, fact, relaunched, run, write_sweep
from sglang_wheel import sglang_adaptive

from analysis import cli
from analysis.facts.schema import Engine


@pytest.fixture(scope="module")
def sglang() -> dict[str, Any]:
    return sglang_adaptive()


# True median decode tok/s per (steps, concurrency); None is the baseline. At concurrency 1 s3 wins
# with s2 within noise, at 4 s2 wins alone, at 16 the baseline wins with s1 within noise.
CURVES: dict[int | None, dict[int, float]] = {
    None: {1: 100.0, 4: 90.0, 16: 80.0},
    1: {1: 110.0, 4: 95.0, 16: 79.8},
    2: {1: 129.5, 4: 105.0, 16: 70.0},
    3: {1: 130.0, 4: 97.0, 16: 60.0},
    4: {1: 118.0, 4: 85.0, 16: 50.0},
}
SPREAD = {1: (0.98, 1.0, 1.02), 4: (0.995, 1.0, 1.005), 16: (0.98, 1.0, 1.02)}


def sweep(root: Path, model: str = "Kimi-K2.5") -> Path:
    """Steps 1..4 and the baseline at concurrency 1, 4 and 16, three repeats each."""
    facts = []
    for steps, by_level in CURVES.items():
        runs = [
            run([tps * f], repeat=i, concurrency=c)
            for c, tps in by_level.items()
            for i, f in enumerate(SPREAD[c])
        ]
        engine = Engine(name="sglang", model=model, launcher="nohup", version="0.5.23")
        facts.append(fact(config(steps), runs, engine=engine))
    return write_sweep(root, relaunched(facts))


def test_the_file_loads_with_sglangs_loader_and_routes_each_batch_to_its_measured_steps(
    tmp_path: Path, sglang: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "adaptive.json"
    code = cli.main(["recommend", str(sweep(tmp_path)), "--format", "json", "--adaptive-config", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f"wrote {out}" in captured.err
    cfg, entries = sglang["_load_adaptive_config"](str(out))
    assert sorted(entries) == [1, 4, 16]
    assert {bs: e["candidate_steps"] for bs, e in entries.items()} == {1: [2, 3], 4: [2], 16: [0, 1]}
    assert list(cfg) == ["1", "4", "16"]  # numeric order in the file, as a human reads it
    params = sglang["AdaptiveSpeculativeParams"](initial_steps=3, cfg_path=str(out))
    assert params.candidate_steps == [0, 1, 2, 3]
    # SGLang routes a batch to the largest key at or below it: 1-3 -> "1", 4-15 -> "4", 16+ -> "16".
    assert [params.get_steps_for_batch(b) for b in (1, 3, 4, 15, 16, 64)] == [3, 3, 2, 2, 1, 1]


def test_sglangs_loader_rejects_what_we_must_never_write(tmp_path: Path, sglang: dict[str, Any]) -> None:
    """The loader the test trusts does check: an empty list, a negative step, no batch-size key."""
    for bad in ({"1": {"candidate_steps": []}}, {"1": {"candidate_steps": [-1]}}, {"x": {}}):
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(bad))
        with pytest.raises(ValueError):
            sglang["_load_adaptive_config"](str(path))


def test_a_level_where_nothing_meets_the_sla_is_left_out_with_a_warning(
    tmp_path: Path, sglang: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """TTFT is 500 ms in every request: a 400 ms SLA fails everything, so no file is written."""
    out = tmp_path / "adaptive.json"
    argv = ["recommend", str(sweep(tmp_path)), "--sla-ttft-p99-ms", "400", "--adaptive-config", str(out)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "no concurrency level has a config that completed and met the SLA" in err
    assert not out.exists()


def test_several_models_make_no_single_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = sweep(tmp_path / "a")
    b = sweep(tmp_path / "b", model="GLM-4.7")
    out = tmp_path / "adaptive.json"
    assert cli.main(["recommend", str(a), str(b), "--adaptive-config", str(out)]) == 2
    assert "an adaptive config serves one model" in capsys.readouterr().err
    assert not out.exists()


def test_hosts_of_one_model_give_the_union_of_their_steps(
    tmp_path: Path, sglang: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """A second host where s4 wins at concurrency 1: that level offers both hosts' choices."""
    sweep(tmp_path)
    runs = [run([t], repeat=i, concurrency=1) for i, t in enumerate((140.0, 141.0, 139.0))]
    other = [run([t], repeat=i, concurrency=1) for i, t in enumerate((100.0, 101.0, 99.0))]
    write_sweep(
        tmp_path, relaunched([fact(config(4), runs, host="gpu-b"), fact(config(), other, host="gpu-b")])
    )
    out = tmp_path / "adaptive.json"
    assert cli.main(["recommend", str(tmp_path / "sweep-1"), "--adaptive-config", str(out)]) == 0
    capsys.readouterr()
    _, entries = sglang["_load_adaptive_config"](str(out))
    assert entries[1]["candidate_steps"] == [2, 3, 4]
    assert entries[16]["candidate_steps"] == [0, 1]
