"""Loading facts, the step-count table and `python -m analysis report`."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from factories import config, crash, fact, run, write_sweep

from analysis.facts.load import load_sweeps
from analysis.facts.schema import to_dict
from analysis.report.cli import build_tables
from analysis.report.compare import step_table
from analysis.report.render import render

REPO = Path(__file__).resolve().parents[2]


def seed_sweep(root: Path) -> Path:
    """The seed case: baseline 88.8 tok/s, 2 steps 94.0, 5 steps slower, 7 steps crashed."""
    facts = [
        # Per-run medians 88.0, 88.8, 90.0: the table must show their median, 88.8.
        fact(
            config(),
            [
                run([88.0, 87.0, 89.0], repeat=0),
                run([88.8], repeat=1),
                run([90.0, 91.0, 10.0], repeat=2),
            ],
        ),
        # The outlier request (200) must not pull the run's median: it is 94.0, not a mean.
        fact(
            config(2),
            [
                run([93.0, 94.0, 200.0], repeat=0, accept_length=2.2),
                run([94.0], repeat=1, accept_length=2.4),
                run([99.0], repeat=2, accept_length=2.6),
            ],
        ),
        fact(config(5), [run([85.0], repeat=r, accept_length=3.1) for r in range(3)]),
        # Fastest numbers, but one repeat lost a request: counted as a failure, never best.
        fact(
            config(3),
            [run([120.0], repeat=0), run([121.0], repeat=1, error="stream reset")],
        ),
        fact(config(7), [], failure=crash()),
    ]
    return write_sweep(root, facts)


def rendered(sweep: Path, fmt: str) -> str:
    """The report of one sweep folder in one format, as `report` prints it."""
    return render(build_tables(load_sweeps([sweep])), fmt)


def text_lines(text: str) -> dict[str, str]:
    """Table lines of a text report by config id (the best / tie marker column skipped)."""
    out = {}
    for line in text.splitlines():
        words = line.split()
        if words and words[0] in ("*", "≈"):
            words = words[1:]
        if words:
            out.setdefault(words[0], line)
    return out


def row(table: pd.DataFrame, config_id: str) -> pd.Series:
    """The single table row of one config."""
    found = table[table["config"] == config_id]
    assert len(found) == 1, f"expected one row for {config_id}, table:\n{table}"
    return found.iloc[0]


def test_speedup_is_relative_to_baseline_median_of_run_medians(tmp_path: Path) -> None:
    table = step_table(load_sweeps([seed_sweep(tmp_path)]).runs)
    assert row(table, "baseline")["decode_tps"] == pytest.approx(88.8)
    assert row(table, "s2")["decode_tps"] == pytest.approx(94.0)
    assert row(table, "s2")["speedup_pct"] == pytest.approx((94.0 / 88.8 - 1) * 100)
    assert row(table, "s5")["speedup_pct"] == pytest.approx((85.0 / 88.8 - 1) * 100)
    assert row(table, "baseline")["speedup_pct"] == pytest.approx(0.0)
    assert row(table, "s2")["accept_length"] == pytest.approx(2.4)
    assert row(table, "s2")["ttft_p50_ms"] == pytest.approx(500.0)
    assert list(table["config"]) == ["baseline", "s2", "s3", "s5", "s7"]


def test_best_is_fastest_config_without_failures(tmp_path: Path) -> None:
    table = step_table(load_sweeps([seed_sweep(tmp_path)]).runs)
    assert table.loc[table["best"], "config"].tolist() == ["s2"]
    s3 = row(table, "s3")
    assert (s3["decode_tps"], s3["repeats_ok"], s3["failures"]) == (120.0, 1, 1)
    assert s3["cause"] == "request_error"


def test_failed_config_is_counted_with_cause(tmp_path: Path) -> None:
    table = step_table(load_sweeps([seed_sweep(tmp_path)]).runs)
    s7 = row(table, "s7")
    assert (s7["failures"], s7["repeats_ok"], s7["cause"]) == (
        1,
        0,
        "crash_during_load",
    )
    assert math.isnan(s7["decode_tps"]) and not s7["best"]
    assert s7["concurrency"] == 1, "a load failure belongs to the levels the sweep measured"


def test_missing_baseline_gives_nan_speedup_rendered_as_dash(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path, [fact(config(2), [run([94.0])])])
    table = step_table(load_sweeps([sweep]).runs)
    assert math.isnan(row(table, "s2")["speedup_pct"])
    line = text_lines(rendered(sweep, "text"))["s2"]
    assert "94.0" in line and "–" in line and "%" not in line, line


def test_speedup_compares_within_host_and_concurrency(tmp_path: Path) -> None:
    facts = [
        fact(config(), [run([100.0], concurrency=1), run([300.0], concurrency=4)]),
        fact(config(2), [run([110.0], concurrency=1), run([270.0], concurrency=4)]),
        fact(config(2), [run([50.0])], host="gpu-b"),
    ]
    table = step_table(load_sweeps([write_sweep(tmp_path, facts)]).runs)
    by_key = table.set_index(["host", "concurrency", "config"])["speedup_pct"]
    assert by_key[("gpu-a", 1, "s2")] == pytest.approx(10.0)
    assert by_key[("gpu-a", 4, "s2")] == pytest.approx(-10.0)
    assert math.isnan(by_key[("gpu-b", 1, "s2")])


def test_unreadable_files_are_reported_by_name_and_skipped(tmp_path: Path) -> None:
    sweep = seed_sweep(tmp_path)
    (sweep / "gpu-a" / "s9.json").write_text('{"sweep_id": "sweep-1", "ho', encoding="utf-8")
    future = to_dict(fact(config(4), [run([90.0])])) | {"schema_version": 99}
    (sweep / "gpu-a" / "s4.json").write_text(json.dumps(future), encoding="utf-8")
    (sweep / "plan.json").write_text("[not a fact]", encoding="utf-8")
    result = load_sweeps([sweep])
    problems = {p.name: reason for p, reason in result.problems}
    assert set(problems) == {"s9.json", "s4.json"}, problems
    assert "not valid JSON" in problems["s9.json"]
    assert "schema_version 99" in problems["s4.json"]
    assert len(result.files) == 5
    assert "s4" not in set(result.runs["config_id"])


def test_requests_keep_their_texts_for_equivalence_checks(tmp_path: Path) -> None:
    result = load_sweeps([seed_sweep(tmp_path)])
    s2 = result.requests[(result.requests["config_id"] == "s2") & (result.requests["repeat"] == 0)]
    assert s2["text"].tolist() == ["answer 0", "answer 1", "answer 2"]


def test_render_text_shows_rounded_numbers_and_marks_best(tmp_path: Path) -> None:
    lines = text_lines(rendered(seed_sweep(tmp_path), "text"))
    assert lines["s2"].startswith("*") and "94.0" in lines["s2"] and "+5.9%" in lines["s2"]
    assert "2.40" in lines["s2"]
    assert "-4.3%" in lines["s5"]
    assert "1 crash_during_load" in lines["s7"]
    assert "88.8" in lines["baseline"]


@pytest.mark.parametrize("fmt", ["csv", "json", "markdown"])
def test_machine_formats_carry_the_table(tmp_path: Path, fmt: str) -> None:
    out = rendered(seed_sweep(tmp_path), fmt)
    assert "s2" in out and ("5.855" in out or "+5.9%" in out), out


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """Run `python -m analysis` from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "analysis", *args],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_report_prints_table_and_lists_skipped_files(tmp_path: Path) -> None:
    sweep = seed_sweep(tmp_path)
    (sweep / "gpu-a" / "broken.json").write_text("{", encoding="utf-8")
    proc = cli("report", str(sweep))
    assert proc.returncode == 0, proc.stderr
    assert "88.8" in proc.stdout and "+5.9%" in proc.stdout, proc.stdout
    assert "broken.json: not valid JSON" in proc.stderr, proc.stderr


def test_cli_exits_2_when_no_facts_or_bad_usage(tmp_path: Path) -> None:
    empty = cli("report", str(tmp_path))
    assert empty.returncode == 2 and "no readable result facts" in empty.stderr, empty
    assert cli("report", str(tmp_path), "--format", "xml").returncode == 2
    assert cli().returncode == 2
