"""The answer per workload and per mix: `recommend` keys on the workload; --mix weighs them by requests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from factories import config, fact, relaunched, run, write_sweep

from analysis import cli
from analysis.facts.load import load_sweeps
from analysis.report import mix
from analysis.report.cli import build_tables
from analysis.report.recommend import recommend
from analysis.sweep.mix import MixError, parse

# Per workload, the median tok/s of three identical repeats: speculation loses on chat, wins on code.
SPEEDS = {"baseline": {"chat": 100.0, "code": 100.0}, "s2": {"chat": 90.0, "code": 150.0}}


def workload_sweep(root: Path) -> Path:
    """A sweep whose two configs each measured chat and code at concurrency 1 and 2 on one launch."""
    facts = []
    for steps, name in [(None, "baseline"), (2, "s2")]:
        runs = [
            run([SPEEDS[name][w] * (1 + 0.001 * i)], repeat=i, concurrency=c, workload=w)
            for w in ("chat", "code")
            for c in (1, 2)
            for i in range(3)
        ]
        facts.append(fact(config(steps), runs))
    return write_sweep(root, relaunched(facts))


def recommend_json(sweep: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    assert cli.main(["recommend", str(sweep), "--format", "json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_mix_is_read_as_shares_of_requests_that_sum_to_one() -> None:
    assert parse("chat=0.7,code=0.3") == pytest.approx({"chat": 0.7, "code": 0.3})
    assert parse("chat=2, code=2") == pytest.approx({"chat": 0.5, "code": 0.5})
    assert parse("chat=1,code=0") == {"chat": 1.0}


@pytest.mark.parametrize("text", ["chat", "chat=x", "=0.5", "chat=-1", "", "chat=0"])
def test_a_mix_that_is_not_workload_equals_share_is_refused(text: str) -> None:
    with pytest.raises(MixError, match="--mix"):
        parse(text)


def test_each_workload_gets_its_own_rows_and_answer(tmp_path: Path) -> None:
    step = build_tables(load_sweeps([workload_sweep(tmp_path)])).step
    rows = step.groupby(["workload", "concurrency"]).size()
    assert rows.to_dict() == {("chat", 1): 2, ("chat", 2): 2, ("code", 1): 2, ("code", 2): 2}
    rec = recommend(step).set_index(["workload", "concurrency"])
    assert rec.loc[("chat", 1), "config"] == "baseline"
    assert rec.loc[("code", 1), "config"] == "s2"


def test_the_mix_weighs_the_workloads_by_requests_and_names_its_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = workload_sweep(tmp_path)
    chatty = recommend_json(sweep, capsys, "--mix", "chat=0.9,code=0.1")
    assert chatty["mix"] == pytest.approx({"chat": 0.9, "code": 0.1})
    assert sorted(chatty["by_workload"]) == ["chat", "code"]
    assert chatty["by_workload"]["chat"]["by_concurrency"]["1"]["config"] == "baseline"
    assert chatty["by_workload"]["code"]["by_concurrency"]["2"]["config"] == "s2"
    # 1 / (0.9 / 90 + 0.1 / 150) = 93.75 tok/s for s2 against the baseline's 100: no gain.
    assert chatty["by_concurrency"]["1"]["config"] == "baseline"
    coder = recommend_json(sweep, capsys, "--mix", "chat=0.1,code=0.9")
    one = coder["by_concurrency"]["1"]
    assert one["config"] == "s2"
    assert one["speedup_pct"] == pytest.approx((1 / (0.1 / 90 + 0.9 / 150) / 100 - 1) * 100, rel=0.01)


def test_a_mix_of_a_workload_not_measured_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["recommend", str(workload_sweep(tmp_path)), "--mix", "math=1"]) == 2
    assert "math not measured here" in capsys.readouterr().err


def test_facts_without_workloads_answer_as_before(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = [run([100.0 + i], repeat=i, concurrency=1) for i in range(3)]
    sweep = write_sweep(
        tmp_path,
        relaunched([fact(config(), runs), fact(config(2), [run([150.0 + i], repeat=i) for i in range(3)])]),
    )
    doc = recommend_json(sweep, capsys)
    assert "by_workload" not in doc and "mix" not in doc
    assert doc["by_concurrency"]["1"]["config"] == "s2"


def test_the_report_has_a_table_per_workload_with_its_accept_length(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["report", str(workload_sweep(tmp_path))]) == 0
    out = capsys.readouterr().out
    for workload in ("chat", "code"):
        assert f"| workload {workload} | concurrency 1" in out, out


def test_recommend_defaults_to_the_mix_the_sweep_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = workload_sweep(tmp_path)
    assert recommend_json(sweep, capsys)["by_concurrency"]["1"]["config"] == "s2"  # equal shares: s2 gains
    (sweep / "sweep.json").write_text(json.dumps({"settings": {"mix": {"chat": 0.9, "code": 0.1}}}))
    asked = recommend_json(sweep, capsys)
    assert asked["mix"] == pytest.approx({"chat": 0.9, "code": 0.1})
    assert asked["by_concurrency"]["1"]["config"] == "baseline"
    assert recommend_json(sweep, capsys, "--mix", "code=1")["by_concurrency"]["1"]["config"] == "s2"
    # Sweeps that recorded different mixes are refused only where no mix is given.
    other = workload_sweep(tmp_path / "other")
    (other / "sweep.json").write_text(json.dumps({"settings": {"mix": {"code": 1.0}}}))
    given = ["recommend", str(sweep), str(other), "--format", "json"]
    assert cli.main(given) == 2 and "different mixes" in capsys.readouterr().err
    assert cli.main([*given, "--mix", "code=1"]) == 0


def test_sweeps_asking_for_different_mixes_are_refused_without_one_given(tmp_path: Path) -> None:
    one, other = tmp_path / "a", tmp_path / "b"
    for folder, shares in ((one, {"chat": 1.0}), (other, {"code": 1.0})):
        folder.mkdir()
        (folder / "sweep.json").write_text(json.dumps({"settings": {"mix": shares}}))
    with pytest.raises(MixError, match="different mixes"):
        mix.recorded([one, other])
    assert mix.recorded([one, one]) == {"chat": 1.0}
    assert mix.recorded([tmp_path]) is None  # a folder without sweep.json names none


def test_the_mix_rate_is_the_request_weighted_harmonic_mean_and_needs_every_workload() -> None:
    rows = pd.DataFrame({"key": [1, 1, 2], "workload": ["chat", "code", "chat"], "rate": [90.0, 150.0, 90.0]})
    got = mix.rates(rows, {"chat": 0.7, "code": 0.3}, ["key"])
    assert got[1] == pytest.approx(1 / (0.7 / 90 + 0.3 / 150))
    assert np.isnan(got[2])  # no code measured for key 2
