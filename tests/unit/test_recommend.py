"""`recommend`: the config per load level, adaptive against static, its JSON, and the load plots."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from factories import config, crash, fact, relaunched, run, write_sweep

from analysis import cli
from analysis.facts.load import load_sweeps
from analysis.report import loadplots
from analysis.report.cli import build_tables
from analysis.report.plots import make_plots
from analysis.report.recommend import adaptive_table, recommend
from analysis.report.sla import Sla
from analysis.sweep.config import Config

ADAPTIVE = Config(
    id="adaptive", speculative=True, algorithm="EAGLE3", steps=3, topk=1, draft_tokens=4, adaptive=True
)


def measured(cfg: Config, by_level: dict[int, tuple[float, ...]], ttft_s: float = 0.5, host: str = "gpu-a"):
    """A fact with one single-request run per value: the run medians are exactly these numbers."""
    runs = [
        run([tps], repeat=i, concurrency=c, ttft_s=ttft_s)
        for c, values in by_level.items()
        for i, tps in enumerate(values)
    ]
    return fact(cfg, runs, host=host)


NO_SLA = Sla()


def recommended(tmp_path: Path, facts: list, sla: Sla = NO_SLA) -> pd.DataFrame:
    """The recommendation of facts written as one sweep, indexed by concurrency."""
    step = build_tables(load_sweeps([write_sweep(tmp_path, facts)]), sla=sla).step
    return recommend(step).set_index("concurrency")


FLAT = (100.0, 100.0, 100.0)


def test_the_fastest_config_that_pays_is_recommended_with_the_tables_interval(tmp_path: Path) -> None:
    """Identical repeats: zero spread, so every interval is exactly its point."""
    rec = recommended(
        tmp_path,
        relaunched(
            [
                measured(config(), {1: FLAT, 4: (90.0,) * 3}),
                measured(config(2), {1: (120.0,) * 3, 4: (99.0,) * 3}),
                measured(config(3), {1: (110.0,) * 3, 4: (108.0,) * 3}),
            ]
        ),
    )
    one, four = rec.loc[1], rec.loc[4]
    assert (one["config"], one["decode_tps"]) == ("s2", 120.0)
    assert (one["speedup_pct"], one["speedup_ci_lo"], one["speedup_ci_hi"]) == pytest.approx(
        (20.0, 20.0, 20.0)
    )
    assert one["within_noise"] == [] and one["reason"] == "fastest; +20.0% [+20.0, +20.0] over baseline"
    assert (four["config"], four["speedup_pct"]) == ("s3", pytest.approx(20.0))
    assert pd.isna(one["meets_sla"]) and pd.isna(one["goodput_rps"])  # no SLA given


def test_baseline_where_the_fastest_speculative_config_is_within_noise_of_it(tmp_path: Path) -> None:
    rec = recommended(
        tmp_path,
        relaunched(
            [
                measured(config(), {1: (100.0, 98.0, 102.0)}),
                measured(config(2), {1: (103.0, 99.0, 105.0)}),
                measured(config(4), {1: (80.0, 81.0, 79.0)}),
            ]
        ),
    )
    one = rec.loc[1]
    assert one["config"] == "baseline" and one["within_noise"] == ["s2"]
    assert one["fastest_config"] == "s2" and one["fastest_verdict_ci_lo"] < 0 < one["fastest_verdict_ci_hi"]
    assert one["reason"].startswith("speculation does not pay: the fastest, s2 (+3.0% [")
    assert one["reason"].endswith("]), is within noise of it")
    assert pd.isna(one["speedup_ci_lo"])  # the baseline against itself: no interval


def test_a_config_missing_the_sla_is_passed_over_and_none_when_all_miss(tmp_path: Path) -> None:
    facts = relaunched(
        [
            measured(config(), {1: FLAT}, ttft_s=0.2),
            measured(config(2), {1: (130.0,) * 3}, ttft_s=0.8),  # fastest, TTFT 800 ms
            measured(config(3), {1: (115.0,) * 3}, ttft_s=0.3),
        ]
    )
    one = recommended(tmp_path, facts, Sla(ttft_p99_ms=500)).loc[1]
    assert (one["config"], bool(one["meets_sla"]), one["n_eligible"]) == ("s3", True, 2)
    assert one["goodput_rps"] == pytest.approx(115.0 / 128)  # its one request of 128 tokens at 115 tok/s
    none = recommended(tmp_path / "b", facts, Sla(ttft_p99_ms=100)).loc[1]
    assert pd.isna(none["config"]) and none["reason"] == "none of the 3 configs that completed meets the SLA"


def test_failed_configs_are_never_recommended_and_a_median_alone_never_names_speculation(
    tmp_path: Path,
) -> None:
    facts = [
        measured(config(), {1: (100.0,)}),
        measured(config(2), {1: (101.0,)}),
        fact(config(3), [run([150.0], repeat=0), run([150.0], repeat=1, error="stream reset")]),
        fact(config(5), [], failure=crash()),
    ]
    one = recommended(tmp_path, facts).loc[1]
    assert one["config"] == "baseline" and one["fastest_config"] == "s2", one
    assert one["reason"] == "speculation not shown to pay: the fastest, s2 (+1.0% (no CI)), has no verdict"


def test_a_config_better_than_the_baseline_wins_over_a_faster_median_within_noise(tmp_path: Path) -> None:
    rec = recommended(
        tmp_path,
        relaunched(
            [
                measured(config(), {1: (100.0, 100.5, 99.5)}),
                measured(config(2), {1: (130.0, 90.0, 170.0)}),  # fastest median, all over the place
                measured(config(3), {1: (115.0, 115.5, 114.5)}),
            ]
        ),
    )
    one = rec.loc[1]
    assert (one["config"], one["verdict"]) == ("s3", "better"), one
    assert one["within_noise"] == ["s2"] and one["reason"].startswith("fastest; +15.0% [")


def test_a_point_estimate_the_verdict_does_not_back_leaves_the_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One launch of each: +20% with a tight within-launch CI, but the verdict allows the launch
    spread such a sweep cannot measure, so it is within noise and the baseline stays."""
    sweep = write_sweep(tmp_path, [measured(config(), {1: FLAT}), measured(config(2), {1: (120.0,) * 3})])
    step = build_tables(load_sweeps([sweep])).step
    s2 = step[step["config"] == "s2"].iloc[0]
    assert s2["speedup_ci_lo"] > 0 and s2["verdict"] == "within_noise", s2
    one = recommend(step).set_index("concurrency").loc[1]
    assert (one["config"], one["within_noise"]) == ("baseline", ["s2"])
    assert one["reason"].startswith("speculation does not pay: the fastest, s2 (+20.0% [")
    assert cli.main(["recommend", str(sweep), "--format", "json"]) == 0
    level = json.loads(capsys.readouterr().out)["by_concurrency"]["1"]
    assert (level["config"], level["within_noise"]) == ("baseline", ["s2"])
    assert level["configs"]["s2"]["verdict"] == "within_noise"
    assert cli.main(["recommend", str(sweep)]) == 0
    line = capsys.readouterr().out.splitlines()[3]
    assert line.split()[:2] == ["1", "baseline"] and " s2 " in line, line


def adaptive_facts() -> list:
    """Adaptive 5% faster than the best static at 1, 10% slower at 4, within noise at 16."""
    return relaunched(
        [
            measured(config(), {1: FLAT, 4: FLAT, 16: (100.0, 98.0, 102.0)}),
            measured(config(2), {1: (120.0,) * 3, 4: (120.0,) * 3, 16: (110.0, 108.0, 112.0)}),
            measured(ADAPTIVE, {1: (126.0,) * 3, 4: (108.0,) * 3, 16: (111.0, 107.0, 113.0)}),
        ]
    )


def test_adaptive_is_compared_with_the_best_static_config_per_level(tmp_path: Path) -> None:
    step = build_tables(load_sweeps([write_sweep(tmp_path, adaptive_facts())])).step
    arms = adaptive_table(step).set_index("concurrency")
    assert arms["best_static"].tolist() == ["s2", "s2", "s2"]
    assert arms["at_least_as_fast"].tolist() == [True, False, True]
    assert arms.loc[1, "verdict"] == "faster than s2: +5.0% [+5.0, +5.0]"
    assert arms.loc[4, "verdict"] == "slower than s2: -10.0% [-10.0, -10.0]"
    assert arms.loc[16, "verdict"].startswith("as fast as s2 (within noise): +0.9% [")
    rec = recommend(step).set_index("concurrency")
    assert rec["config"].tolist() == ["adaptive", "s2", "adaptive"]


def test_json_has_one_object_per_host_group_keyed_by_concurrency(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = write_sweep(tmp_path, adaptive_facts())
    assert cli.main(["recommend", str(sweep), "--format", "json", "--sla-itl-p99-ms", "50"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["host"], doc["engine"], doc["model"], doc["sla"]) == (
        "gpu-a", "sglang", "Kimi-K2.5", {"ttft_p99_ms": None, "itl_p99_ms": 50.0},
    )  # fmt: skip
    assert list(doc["by_concurrency"]) == ["1", "4", "16"]
    four = doc["by_concurrency"]["4"]
    assert {k: four[k] for k in ("config", "tok_s", "within_noise", "meets_sla")} == {
        "config": "s2", "tok_s": 120.0, "within_noise": [], "meets_sla": True,
    }  # fmt: skip
    assert four["speedup_ci"] == pytest.approx([20.0, 20.0])
    assert four["goodput_rps"] == pytest.approx(120 / 128)
    # What it ranked on, named, and the chosen config's figure of it.
    assert doc["objective"] == "throughput" and four["score"] == pytest.approx(120.0)
    assert four["adaptive"]["at_least_as_fast"] is False and four["adaptive"]["best_static"] == "s2"
    # A second host: a list of two such objects, one per host.
    write_sweep(
        tmp_path, [measured(config(), {1: FLAT}, host="gpu-b"), measured(config(2), {1: FLAT}, host="gpu-b")]
    )
    assert cli.main(["recommend", str(sweep), "--format", "json"]) == 0
    docs = json.loads(capsys.readouterr().out)
    assert [d["host"] for d in docs] == ["gpu-a", "gpu-b"]
    assert (
        docs[1]["by_concurrency"]["1"]["config"] == "baseline"
        and docs[1]["by_concurrency"]["1"]["adaptive"] is None
    )


def test_text_lists_each_level_with_its_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = write_sweep(tmp_path, adaptive_facts())
    assert cli.main(["recommend", str(sweep)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "recommended on throughput | sweep sweep-1 | host gpu-a | sglang Kimi-K2.5"
    assert lines[1].startswith("ranked on throughput (total output tok/s): objective=throughput;"), lines[1]
    assert lines[2].split()[:5] == ["concurrency", "config", "throughput", "tok/s", "tok/s"], lines[2]
    assert lines[3].split()[:5] == ["1", "adaptive", "126.0", "126.0", "+26.0%"]
    assert "faster than s2: +5.0% [+5.0, +5.0]" in lines[3]
    assert lines[4].split()[:2] == ["4", "s2"] and lines[4].rstrip().endswith("over baseline")


def test_no_results_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["recommend", str(tmp_path)]) == 2
    assert "no readable result facts" in capsys.readouterr().err


def test_the_pareto_front_keeps_the_points_no_other_point_beats_on_both_axes() -> None:
    points = pd.DataFrame(
        {"total_tps": [100.0, 300.0, 250.0, 400.0, 90.0], "user_tps": [100.0, 75.0, 60.0, 25.0, 95.0]}
    )
    assert loadplots.front(points).index.tolist() == [0, 1, 3]


def test_the_report_draws_the_load_plots_for_a_host_group_measured_at_several_levels(tmp_path: Path) -> None:
    tables = build_tables(load_sweeps([write_sweep(tmp_path, adaptive_facts())]))
    plots, _ = make_plots(tables.step, tables.speed)
    names = [p.name for p in plots]
    assert "sweep-1_gpu-a_sglang_Kimi-K2.5_pareto.png" in names
    assert "sweep-1_gpu-a_sglang_Kimi-K2.5_best_steps.png" in names
    assert all(p.png.startswith(b"\x89PNG") for p in plots)
    single = build_tables(load_sweeps([write_sweep(tmp_path / "one", [measured(config(), {1: FLAT})])]))
    assert not any(
        n.endswith(("_pareto.png", "_best_steps.png"))
        for n in (p.name for p in make_plots(single.step, single.speed)[0])
    )


def test_without_an_adaptive_arm_or_sla_the_text_shows_dashes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = write_sweep(
        tmp_path, relaunched([measured(config(), {1: FLAT}), measured(config(2), {1: (110.0,) * 3})])
    )
    assert cli.main(["recommend", str(sweep), "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "SLA: no SLA; tok/s: median decode tok/s per request" in out
    row = next(line for line in out.splitlines() if line.startswith("| 1 |"))
    assert row.split(" | ")[1:9] == ["s2", "110.0", "110.0", "+10.0% [+10.0, +10.0]", "–", "–", "–", "–"]
