"""Comparisons: confidence intervals, noise markers, output equivalence, cross-host, real facts."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from factories import config, crash, fact, relaunched, run, write_sweep

from analysis.facts.load import load_sweeps
from analysis.facts.rows import step_time_ms
from analysis.facts.schema import Engine
from analysis.report.cli import build_tables
from analysis.report.equivalence import first_difference
from analysis.report.plots import _lines
from analysis.report.render import render

FIXTURES = Path(__file__).parent / "fixtures" / "facts"


def repeats(tps: list[float], **kwargs: object) -> list:
    """One single-request run per value: the run medians are exactly these numbers."""
    return [run([t], repeat=i, **kwargs) for i, t in enumerate(tps)]


def tables(tmp_path: Path, facts: list, noisy_cv: float = 0.05):
    """Build the report tables of facts written as one sweep folder."""
    return build_tables(load_sweeps([write_sweep(tmp_path, facts)]), noisy_cv=noisy_cv)


def row(table: pd.DataFrame, config_id: str, host: str = "gpu-a") -> pd.Series:
    """The one step-table row of a config on a host."""
    found = table[(table["config"] == config_id) & (table["host"] == host)]
    assert len(found) == 1, f"expected one row for {host}/{config_id}, table:\n{table}"
    return found.iloc[0]


def line_of(text: str, config_id: str) -> str:
    """The rendered line of a config (any leading best / tie marker skipped)."""
    for line in text.splitlines():
        words = [w for w in line.split() if w not in ("*", "≈")]
        if words and words[0] == config_id:
            return line
    raise AssertionError(f"no line for {config_id} in:\n{text}")


def test_speedup_ci_is_welch_t_on_log_tok_s(tmp_path: Path) -> None:
    d = 0.02
    base = [90.0, 90.0 * math.exp(d), 90.0 * math.exp(-d)]
    spec = [100.0, 100.0 * math.exp(d), 100.0 * math.exp(-d)]
    t = tables(tmp_path, [fact(config(), repeats(base)), fact(config(2), repeats(spec))]).step
    # Equal log variances d^2 and n = 3 on both sides: Welch's df is exactly 4 (t = 2.7764).
    half = 2.7764 * math.sqrt(2 * d**2 / 3)
    s2 = row(t, "s2")
    assert s2["speedup_pct"] == pytest.approx((100 / 90 - 1) * 100)
    assert s2["speedup_ci_lo"] == pytest.approx((100 / 90 * math.exp(-half) - 1) * 100, rel=1e-4)
    assert s2["speedup_ci_hi"] == pytest.approx((100 / 90 * math.exp(half) - 1) * 100, rel=1e-4)
    assert pd.notna(s2["within_noise"]) and not s2["within_noise"], "the interval excludes 0: a real win"
    assert math.isnan(row(t, "baseline")["speedup_ci_lo"]), "the baseline has no interval against itself"


def test_one_percent_win_inside_three_percent_noise_is_marked_within_noise(tmp_path: Path) -> None:
    facts = [
        fact(config(), repeats([100.0, 97.0, 103.0])),
        fact(config(2), repeats([101.0, 98.0, 104.0])),  # +1%, repeats spread +-3%
        fact(config(3), repeats([110.0, 110.5, 109.5])),  # +10%, tight
    ]
    t = tables(tmp_path, facts)
    s2, s3 = row(t.step, "s2"), row(t.step, "s3")
    assert s2["speedup_ci_lo"] < 0 < s2["speedup_ci_hi"] and bool(s2["within_noise"]), s2
    assert s3["speedup_ci_lo"] > 0 and not bool(s3["within_noise"]), s3
    text = render(t, "text")
    assert line_of(text, "s2").split("]")[1].lstrip().startswith("~"), line_of(text, "s2")
    assert "~" not in line_of(text, "s3"), line_of(text, "s3")
    assert "\\~" in render(t, "markdown")


def test_configs_within_noise_of_the_best_are_marked_tied(tmp_path: Path) -> None:
    facts = [
        fact(config(), repeats([80.0, 80.5, 79.5])),
        fact(config(2), repeats([100.0, 103.0, 97.0])),
        fact(config(3), repeats([99.0, 102.0, 96.0])),
        fact(config(4), repeats([90.0, 90.2, 89.8])),
        fact(config(5), repeats([40.0, 40.2, 39.8])),
    ]
    t = tables(tmp_path, facts)
    assert row(t.step, "s2")["best"] and pd.isna(row(t.step, "s2")["tie_best"])
    # One launch each: -10% is within the launch spread the table allows (the verdict's prior);
    # -60% is not, and racing would drop it (analysis.running.race reads this interval).
    assert bool(row(t.step, "s3")["tie_best"]) and bool(row(t.step, "s4")["tie_best"])
    assert not bool(row(t.step, "s5")["tie_best"]) and row(t.step, "s5")["vs_best_ci_hi"] < 0
    text = render(t, "text")
    assert line_of(text, "s2").startswith("*") and line_of(text, "s3").startswith("≈")
    assert line_of(text, "s5").startswith(" "), line_of(text, "s5")


def test_the_legend_explains_only_the_marks_some_row_carries(tmp_path: Path) -> None:
    """Steady repeats, the baseline launched twice: no ¹, ‡, <, ! or ~ in any cell, so no such line;
    one launch each puts ¹ on the speedups and brings its line back."""
    steady = [fact(config(), repeats([100.0, 100.5, 99.5])), fact(config(2), repeats([120.0, 120.5, 119.5]))]
    text = render(tables(tmp_path / "a", relaunched(steady)), "text")
    legend = text.split("\n\n")[-1].splitlines()
    assert [line.split(":")[0] for line in legend] == [
        "* best", "tok/s/req", "TPOT", "text vs base", "launches", "interfered", "in flight",
        "speedup, verdict, best",
    ], legend  # fmt: skip
    md = render(tables(tmp_path / "b", relaunched(steady)), "markdown")
    assert "within one launch" not in md and "unsteady" not in md and "not reached" not in md, md
    once = render(tables(tmp_path / "c", steady), "text")
    assert "+20.0%¹" in line_of(once, "s2") and "\n¹ within one launch: no config" in once, once
    assert "‡ unsteady" not in once and "< not reached" not in once and "! noisy" not in once, once


def test_single_repeat_has_a_speedup_but_no_interval(tmp_path: Path) -> None:
    t = tables(tmp_path, [fact(config(), repeats([90.0, 91.0])), fact(config(2), repeats([99.0]))])
    s2 = row(t.step, "s2")
    assert s2["speedup_pct"] == pytest.approx((99.0 / 90.5 - 1) * 100)
    assert math.isnan(s2["speedup_ci_lo"]) and pd.isna(s2["within_noise"]) and math.isnan(s2["cv_pct"])
    assert "+9.4% [no CI]" in line_of(render(t, "text"), "s2")


def test_noisy_cells_are_flagged_by_coefficient_of_variation(tmp_path: Path) -> None:
    facts = [fact(config(), repeats([100.0, 101.0, 99.0])), fact(config(2), repeats([100.0, 120.0, 80.0]))]
    t = tables(tmp_path, facts)
    assert row(t.step, "s2")["cv_pct"] == pytest.approx(20.0)
    assert row(t.step, "s2")["noisy"] and not row(t.step, "baseline")["noisy"]
    assert "20.0%!" in line_of(render(t, "text"), "s2")
    relaxed = tables(tmp_path / "relaxed", facts, noisy_cv=0.25)
    assert not row(relaxed.step, "s2")["noisy"]


def test_all_failed_sweep_has_no_best_and_still_renders(tmp_path: Path) -> None:
    facts = [fact(config(), [], failure=crash("out_of_memory")), fact(config(2), [], failure=crash())]
    t = tables(tmp_path, facts)
    assert not t.step["best"].any() and t.step["failures"].tolist() == [1, 1]
    text = render(t, "text")
    assert "1 out_of_memory" in line_of(text, "baseline") and "1 crash_during_load" in line_of(text, "s2")


def test_mixed_engines_compare_each_against_its_own_baseline(tmp_path: Path) -> None:
    llama = Engine(name="llama_cpp", model="gemma.gguf", launcher="nohup", version="b1")
    facts = [
        fact(config(), repeats([90.0, 90.0])),
        fact(config(2), repeats([99.0, 99.0])),
        fact(config(), repeats([20.0, 20.0]), engine=llama, host="cpu-b"),
        fact(config(2), repeats([18.0, 18.0]), engine=llama, host="cpu-b"),
    ]
    step = tables(tmp_path, facts).step
    by = step.set_index(["engine", "config"])["speedup_pct"]
    assert by[("sglang", "s2")] == pytest.approx(10.0) and by[("llama_cpp", "s2")] == pytest.approx(-10.0)
    assert step.groupby("engine")["best"].sum().to_dict() == {"llama_cpp": 1, "sglang": 1}


def test_first_difference_counts_whitespace_words_of_the_baseline() -> None:
    assert first_difference("a b c", "a b c") is None
    assert first_difference("alpha beta gamma", "alpha beta delta") == (2, 11)
    assert first_difference("alpha beta", "alpha betamax") == (1, 10), "a longer word differs at that word"
    assert first_difference("alpha beta", "alpha  beta") == (1, 6), "whitespace changes count"
    assert first_difference("x", "y") == (0, 0)
    assert first_difference("same start", "same start and more") == (2, 10), "extra words after the last"
    assert first_difference("line one\nnext", "line one next") == (2, 8)


def test_equivalence_reports_first_divergent_word_per_config(tmp_path: Path) -> None:
    texts = ["the quick brown fox", "jumps over the dog"]
    late = ["the quick brown fox", "jumps over a dog"]
    facts = [
        fact(config(), [run([90.0, 90.0], repeat=r, texts=texts) for r in range(2)]),
        fact(config(2), [run([99.0, 99.0], repeat=r, texts=texts) for r in range(2)]),
        fact(config(3), [run([99.0, 99.0], repeat=0, texts=texts), run([99.0, 99.0], repeat=1, texts=late)]),
    ]
    t = tables(tmp_path, facts)
    s3 = row(t.step, "s3")
    assert (s3["text_compared"], s3["text_diverged"], s3["diverge_word"]) == (4, 1, 2)
    assert (row(t.step, "s2")["text_compared"], row(t.step, "s2")["text_diverged"]) == (4, 0)
    text = render(t, "text")
    assert "w2 1/4" in line_of(text, "s3") and "same 4/4" in line_of(text, "s2")
    assert "base" in line_of(text, "baseline")


def test_step_time_comes_from_sglang_step_time_dict_when_recorded(tmp_path: Path) -> None:
    assert step_time_ms({"step_time_dict": {"1": [0.020, 0.022, 0.021]}}, 1) == pytest.approx(21.0)
    assert step_time_ms({"step_time_dict": {"8": [0.03]}}, 1) is None
    assert step_time_ms({"step_time_dict": {"1": "not a list"}}, 1) is None
    assert step_time_ms({}, 1) is None
    facts = [
        fact(config(), repeats([90.0, 91.0])),
        fact(config(2), repeats([99.0, 98.0]), server_info={"step_time_dict": {"1": [0.0217, 0.0217]}}),
    ]
    t = tables(tmp_path, facts)
    assert row(t.step, "s2")["step_ms"] == pytest.approx(21.7) and math.isnan(
        row(t.step, "baseline")["step_ms"]
    )
    assert "21.7" in line_of(render(t, "text"), "s2")


def test_cross_host_view_puts_hosts_side_by_side_and_flags_the_slow_one(tmp_path: Path) -> None:
    facts = [
        fact(cfg, repeats([tps * scale, tps * scale]), host=host)
        for host, scale in [("gpu-a", 1.0), ("gpu-b", 1.01), ("gpu-c", 0.8)]
        for cfg, tps in [(config(), 90.0), (config(2), 99.0)]
    ]
    t = tables(tmp_path, facts)
    s2 = t.cross.set_index("config").loc["s2"]
    assert (s2["gpu-a"], s2["gpu-c"], s2["slowest"]) == (pytest.approx(99.0), pytest.approx(79.2), "gpu-c")
    assert s2["spread_pct"] == pytest.approx((99.99 / 79.2 - 1) * 100)
    speed = t.speed.set_index("host")
    assert bool(speed.loc["gpu-c", "slow"]) and not bool(speed.loc["gpu-a", "slow"])
    assert "gpu-c -20.0% SLOW" in render(t, "text")


def test_a_shard_sweep_compares_hosts_only_on_the_configs_they_share(tmp_path: Path) -> None:
    # Shard mode: the baseline on every host, each speculative config on one host only.
    baselines = {"gpu-a": 100.0, "gpu-b": 108.0, "gpu-c": 104.0}
    facts = [fact(config(), repeats([tps, tps]), host=host) for host, tps in baselines.items()]
    facts += [fact(config(steps), repeats([120.0, 120.0]), host=host)
              for steps, host in [(1, "gpu-a"), (2, "gpu-b"), (3, "gpu-c")]]  # fmt: skip
    t = tables(tmp_path, facts)
    speed = t.speed.set_index("host")
    assert speed["relative_pct"].to_dict() == pytest.approx(
        {"gpu-a": (100 / 104 - 1) * 100, "gpu-b": (108 / 104 - 1) * 100, "gpu-c": 0.0}
    )
    assert speed["configs"].tolist() == [1, 1, 1]  # the baseline only, not each host's own s<N>
    assert t.cross["config"].tolist() == ["baseline"]


def test_hosts_come_in_natural_order_in_tables_and_plots(tmp_path: Path) -> None:
    names = ["gpu-10", "gpu-2", "gpu-1"]  # lexical order would put gpu-10 before gpu-2
    facts = [fact(cfg, repeats([90.0, 91.0]), host=h) for h in names for cfg in (config(), config(2))]
    t = tables(tmp_path, facts)
    natural_order = ["gpu-1", "gpu-2", "gpu-10"]
    assert t.step["host"].drop_duplicates().tolist() == natural_order
    assert [c for c in t.cross.columns if str(c).startswith("gpu-")] == natural_order
    assert t.speed["host"].tolist() == natural_order
    text = render(t, "text")
    assert [text.index(f"host {h} ") for h in natural_order] == sorted(
        text.index(f"host {h} ") for h in natural_order
    )
    lines, _ = _lines(t.step[t.step["speculative"].astype(bool)])
    assert [host for _, host, _ in lines] == natural_order


def test_real_llama_cpp_facts_from_this_machine(tmp_path: Path) -> None:
    t = build_tables(load_sweeps([FIXTURES / "t2probe"]))
    step = t.step.set_index("config")
    assert list(step.index) == ["baseline", "s2", "s4"]
    assert step.loc["s2", "accept_length"] == pytest.approx(2.4001, abs=1e-3)
    assert step.loc["s4", "accept_length"] == pytest.approx(2.8611, abs=1e-3)
    assert step["repeats_ok"].tolist() == [2, 2, 2]
    # CPU float ties: speculation changed 3 of 8 texts at 4 steps; reported, never a failure.
    assert (step.loc["s4", "text_diverged"], step.loc["s4", "diverge_word"]) == (3, 7)
    assert (step.loc["s2", "text_compared"], step.loc["s2", "text_diverged"]) == (8, 0)
    assert step["failures"].sum() == 0
    # Two repeats with a 34% spread: nothing here is distinguishable from the baseline.
    assert step.loc["s2", "within_noise"] and step.loc["s4", "within_noise"]
