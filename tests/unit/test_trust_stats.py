"""The speedup interval over launches (issue 24): hierarchical CI, one-launch labelling, drift,
unsteady launches, interfered repeats, and the verdict words of `recommend --format json`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from factories import config, fact, run, write_sweep

from analysis import cli
from analysis.facts.load import load_sweeps
from analysis.report.cli import build_tables
from analysis.report.render import render


def repeats(tps: list[float], **kwargs: object) -> list:
    """One single-request run per value: the run medians are exactly these numbers."""
    return [run([t], repeat=i, **kwargs) for i, t in enumerate(tps)]


def launched(steps: int | None, tps: list[float], k: int = 1, at: float = 1.0, **kwargs: object):
    """The k-th launch of a config (baseline: steps None), started at `at`."""
    return fact(config(steps), repeats(tps, **kwargs), launch_index=k, started_at=at)


def step(tmp_path: Path, facts: list) -> pd.DataFrame:
    return build_tables(load_sweeps([write_sweep(tmp_path, facts)])).step


def row(t: pd.DataFrame, config_id: str) -> pd.Series:
    (found,) = [r for _, r in t.iterrows() if r["config"] == config_id]
    return found


def test_two_launches_a_side_give_the_interval_of_launch_means_with_launch_df(tmp_path: Path) -> None:
    # Repeats identical within a launch, launches 10% apart on both sides: every launch-mean spread
    # is log(1.1)^2 / 2, pooled over 2 cells of 2 launches (2 df); each side's mean varies by
    # tau2 / 2, and Welch's df over two sides of 2 df with equal variances is exactly 4.
    t = step(
        tmp_path,
        [
            launched(None, [30.0] * 3, 1, at=1.0),
            launched(1, [40.0] * 3, 1, at=2.0),
            launched(1, [44.0] * 3, 2, at=3.0),
            launched(None, [33.0] * 3, 2, at=4.0),
        ],
    )
    tau2 = math.log(1.1) ** 2 / 2
    half = 2.7764 * math.sqrt(tau2 / 2 + tau2 / 2)
    point = 42.0 / 31.5  # medians over every repeat of both launches
    s1 = row(t, "s1")
    assert (s1["launches"], s1["ci_basis"], s1["launch_df"]) == (2, "launches", 2)
    assert s1["se2"] == pytest.approx(tau2 / 2) and s1["se_df"] == 2
    assert s1["speedup_pct"] == pytest.approx((point - 1) * 100)
    assert s1["speedup_ci_lo"] == pytest.approx((point * math.exp(-half) - 1) * 100, rel=1e-4)
    assert s1["speedup_ci_hi"] == pytest.approx((point * math.exp(half) - 1) * 100, rel=1e-4)
    assert s1["verdict"] == "better" and s1["verdict_ci_lo"] == s1["speedup_ci_lo"]
    assert s1["launch_cv_pct"] == pytest.approx(math.sqrt(math.expm1(tau2)) * 100)


def test_one_launch_without_a_repeated_launch_is_labelled_within_launch(tmp_path: Path) -> None:
    d = 0.02
    base = [90.0, 90.0 * math.exp(d), 90.0 * math.exp(-d)]
    small = [99.0, 99.0 * math.exp(d), 99.0 * math.exp(-d)]  # +10%: decisive within one launch
    large = [200.0, 200.0 * math.exp(d), 200.0 * math.exp(-d)]  # +122%
    tables = build_tables(
        load_sweeps(
            [
                write_sweep(
                    tmp_path, [launched(None, base), launched(1, small, at=2.0), launched(2, large, at=3.0)]
                )
            ]
        )
    )
    t = tables.step
    s1, s2 = row(t, "s1"), row(t, "s2")
    # The interval is today's (Welch on the repeats, df 4), and says so.
    half = 2.7764 * math.sqrt(2 * d**2 / 3)
    assert s1["speedup_ci_lo"] == pytest.approx((99 / 90 * math.exp(-half) - 1) * 100, rel=1e-4)
    assert (s1["ci_basis"], s1["launches"], s1["within_noise"]) == ("within_launch", 1, False)
    # Its verdict allows a launch effect on each side: +10% in one launch decides nothing ...
    assert s1["verdict"] == "within_noise" and s1["verdict_ci_lo"] < 0 < s1["speedup_ci_lo"]
    # ... a doubling does.
    assert s2["verdict"] == "better"
    text = render(tables, "text")
    line = next(x for x in text.splitlines() if " s1 " in x)
    assert "+10.0%¹ [" in line
    assert "¹ within one launch" in text
    header = next(x for x in text.splitlines() if "config" in x and "tok/s" in x)
    assert header.split()[-7:-4] == ["ok", "launches", "interfered"]


def test_one_launch_beside_a_repeated_baseline_takes_the_launch_spread(tmp_path: Path) -> None:
    t = step(
        tmp_path,
        [
            launched(None, [30.0, 30.3, 29.7], 1, at=1.0),
            launched(1, [40.0, 40.4, 39.6], 1, at=2.0),
            launched(None, [33.0, 33.3, 32.7], 2, at=3.0),
        ],
    )
    s1, base = row(t, "s1"), row(t, "baseline")
    assert (s1["ci_basis"], s1["launches"], base["launches"]) == ("launch_var", 1, 2)
    # One launch of s1 varies as much as one launch of the baseline did (its spread, 1 df).
    assert s1["se2"] == pytest.approx(base["se2"] * 2) and s1["se_df"] == 1
    assert s1["verdict"] == "within_noise", (
        "1 df between launches: a 33% win in one launch is not yet decisive"
    )


def test_baseline_drift_beyond_noise_marks_the_group_drifting(tmp_path: Path) -> None:
    steady = [30.0, 30.3, 29.7]
    drifted = step(
        tmp_path / "a",
        [
            launched(None, steady, 1, at=1.0),
            launched(1, [40.0] * 3, at=2.0),
            launched(None, [36.0, 36.3, 35.7], 2, at=3.0),
        ],
    )
    calm_facts = [
        launched(None, steady, 1, at=1.0),
        launched(1, [40.0] * 3, at=2.0),
        launched(None, [30.2, 29.5, 30.4], 2, at=3.0),
    ]
    calm = build_tables(load_sweeps([write_sweep(tmp_path / "b", calm_facts)]))
    b = row(drifted, "baseline")
    assert b["drift_pct"] == pytest.approx((36.0 / 30.0 - 1) * 100, rel=1e-3) and bool(b["drifting"])
    assert bool(row(drifted, "s1")["drifting"]), "the whole level is marked, not one config"
    c = row(calm.step, "baseline")
    assert abs(c["drift_pct"]) < 1 and not bool(c["drifting"])
    assert "within noise; launch-to-launch CV" in render(calm, "text")


def test_drift_is_printed_over_the_table(tmp_path: Path) -> None:
    facts = [
        launched(None, [30.0, 30.3, 29.7], 1, at=1.0),
        launched(1, [40.0] * 3, at=2.0),
        launched(None, [36.0, 36.3, 35.7], 2, at=3.0),
    ]
    text = render(build_tables(load_sweeps([write_sweep(tmp_path, facts)])), "text")
    assert "baseline drift, last launch vs first: +20.0% [" in text and "DRIFTING" in text


def test_halves_of_one_launch_that_disagree_are_flagged_unsteady(tmp_path: Path) -> None:
    # The H200 case: one load measured twice in one launch, the second time 28% faster.
    odd = [100.0, 101.0, 99.0, 128.0, 129.0, 127.0]
    even = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2]
    tables = build_tables(
        load_sweeps([write_sweep(tmp_path, [launched(None, even), launched(1, odd, at=2.0)])])
    )
    assert row(tables.step, "s1")["unsteady"] == 1 and row(tables.step, "baseline")["unsteady"] == 0
    line = next(x for x in render(tables, "text").splitlines() if " s1 " in x)
    assert "‡" in line


def test_interfered_repeats_are_counted_and_kept_in_the_figures(tmp_path: Path) -> None:
    runs = [run([t], repeat=i, interfered=i < 2) for i, t in enumerate([100.0, 104.0, 96.0])]
    t = step(tmp_path, [launched(None, [90.0, 91.0, 89.0]), fact(config(1), runs, started_at=2.0)])
    s1 = row(t, "s1")
    assert s1["interfered"] == 2 and row(t, "baseline")["interfered"] == 0
    assert s1["decode_tps"] == 100.0 and s1["repeats_ok"] == 3


def test_recommend_json_gives_verdict_words_per_config_and_level(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    facts = [
        launched(None, [30.0] * 3, 1, at=1.0),
        launched(1, [40.0] * 3, 1, at=2.0),
        launched(2, [29.0] * 3, 1, at=2.5),
        launched(1, [44.0] * 3, 2, at=3.0),
        launched(2, [31.9] * 3, 2, at=3.5),
        launched(None, [33.0] * 3, 2, at=4.0),
    ]
    sweep = write_sweep(tmp_path, facts)
    assert cli.main(["recommend", str(sweep), "--format", "json"]) == 0
    level = json.loads(capsys.readouterr().out)["by_concurrency"]["1"]
    assert (level["config"], level["verdict"], level["launches"], level["ci_basis"]) == (
        "s1",
        "better",
        2,
        "launches",
    )
    assert level["speedup_ci"][0] > 0 and "tok_s" in level and "within_noise" in level
    assert set(level["configs"]) == {"baseline", "s1", "s2"}
    s2 = level["configs"]["s2"]
    assert s2["verdict"] in ("worse", "within_noise") and s2["launches"] == 2 and len(s2["speedup_ci"]) == 2
    assert level["configs"]["baseline"]["verdict"] is None


def test_recommend_text_says_when_a_verdict_rests_on_one_launch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = write_sweep(
        tmp_path, [launched(None, [90.0, 91.0, 89.0]), launched(1, [200.0, 201.0, 199.0], at=2.0)]
    )
    assert cli.main(["recommend", str(sweep)]) == 0
    out = capsys.readouterr().out
    assert "better (1 launch, within-launch CI)" in out
