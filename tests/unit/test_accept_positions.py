"""Acceptance per draft position (analysis.report.positions): from SGLang's per-request histogram of
drafts accepted per verify step, summed per run by the client, to a view per workload in the report."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from factories import config, fact, run, write_sweep

from analysis import cli
from analysis.facts.load import load_sweeps
from analysis.facts.schema import SpecStats
from analysis.report.positions import by_position, position_table


def test_the_acceptance_at_position_k_is_the_share_of_steps_accepting_k_or_more() -> None:
    # 5 steps of 3 drafts accepting 1, 2, 2, 3, 3 (as SGLang counts them: [k] = steps accepting k).
    assert by_position([0, 1, 2, 2]) == pytest.approx([1.0, 0.8, 0.4])
    # Positions no step reached read 0 up to the drafts proposed per step; no steps, no figures.
    assert by_position([3, 1], drafts=3) == pytest.approx([0.25, 0.0, 0.0])
    assert by_position([]) == [] and by_position([0, 0]) == []


# Per workload, the histograms of two repeats of s3 (3 drafts a step): code accepts deeper than chat.
HISTOGRAMS = {"chat": [[4, 3, 2, 1], [6, 2, 1, 1]], "code": [[0, 1, 2, 7], [1, 0, 3, 6]]}


def positions_sweep(root: Path, histograms: bool = True) -> Path:
    """Baseline and s3, each measuring chat and code twice at c = 1; s3 with SGLang's histograms."""
    facts = []
    for steps in (None, 3):
        runs = []
        for workload, per_repeat in HISTOGRAMS.items():
            for i, h in enumerate(per_repeat):
                r = run([100.0], repeat=i, concurrency=1, workload=workload)
                if steps and histograms:
                    spec = SpecStats(drafted=3 * sum(h), verify_steps=sum(h), accepted_histogram=h)
                    r = msgspec.structs.replace(r, spec=spec)
                runs.append(r)
        facts.append(fact(config(steps), runs))
    return write_sweep(root, facts)


def test_each_workload_gets_its_acceptance_by_position_summed_over_its_repeats(tmp_path: Path) -> None:
    table = position_table(load_sweeps([positions_sweep(tmp_path)]).runs)
    got = {w: r for w, r in zip(table["workload"], table["by_position"], strict=True)}
    assert sorted(got) == ["chat", "code"] and set(table["config"]) == {"s3"}  # the baseline drafts nothing
    # chat: [10, 5, 3, 2] over 20 steps; code: [1, 1, 5, 13].
    assert got["chat"] == pytest.approx([10 / 20, 5 / 20, 2 / 20])
    assert got["code"] == pytest.approx([19 / 20, 18 / 20, 13 / 20])
    steps = dict(zip(table["workload"], table["tokens_per_step"], strict=True))
    assert steps["code"] == pytest.approx(1 + (19 + 18 + 13) / 20)


def test_the_report_shows_the_view_where_the_engine_reported_it_and_only_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["report", str(positions_sweep(tmp_path / "sglang"))]) == 0
    out = capsys.readouterr().out
    for workload in ("chat", "code"):
        assert (
            f"accept by draft position | sweep sweep-1 | host gpu-a | sglang Kimi-K2.5 | workload {workload}"
            in out
        )
    lines = [line.split() for line in out.splitlines()]
    assert ["1", "s3", "20", "3.50", "0.95", "0.90", "0.65"] in lines, out  # code, pos 1..3
    assert cli.main(["report", str(positions_sweep(tmp_path / "llama", histograms=False))]) == 0
    assert "accept by draft position" not in capsys.readouterr().out
