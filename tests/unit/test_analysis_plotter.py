"""The plot helper: same figures as drawing in-process, errors surface, never left running."""

from __future__ import annotations

import dataclasses
import pickle
import stat
from pathlib import Path

import pytest
from factories import config, fact, run, write_sweep

from analysis import cache, forks
from analysis.facts.load import load_sweeps
from analysis.report import plots
from analysis.report.cli import build_tables
from analysis.report.plotter import Plotter
from analysis.report.render import Tables


def small_tables(root: Path) -> Tables:
    """A baseline and two step counts on two hosts: three kinds of plot."""
    facts = [
        fact(config(s), [run([90.0 + (s or 0) + h], repeat=r) for r in range(2)], host=f"gpu-{h}")
        for h in range(2)
        for s in (None, 1, 2)
    ]
    return build_tables(load_sweeps([write_sweep(root, facts)]))


def test_the_helper_draws_what_drawing_here_draws(tmp_path: Path) -> None:
    tables = small_tables(tmp_path)
    with Plotter() as helper:
        helper.submit(tables.step, tables.speed)
        drawn, omitted = helper.result()
        assert helper.result() == (drawn, omitted), "asked twice, answered once"
    here, _ = plots.make_plots(tables.step, tables.speed)
    kinds = [p.name.rsplit("_c1_", 1)[1] for p in drawn]
    assert kinds == ["tokps_vs_steps.png", "per_host.png"] and omitted == 0
    assert [(p.name, p.png) for p in drawn] == [(p.name, p.png) for p in here]


def test_without_fork_the_plots_are_drawn_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tables = small_tables(tmp_path)
    monkeypatch.setattr(forks, "available", lambda: False)
    with Plotter() as here:
        here.submit(tables.step, tables.speed)
        assert [p.png for p in here.result()[0]] == [
            p.png for p in plots.make_plots(tables.step, tables.speed)[0]
        ]


def test_a_failure_in_the_helper_is_raised_with_its_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tables = small_tables(tmp_path)

    def broken(*_: object) -> None:
        raise ValueError("no axes today")

    monkeypatch.setattr(plots, "make_plots", broken)  # the forked helper inherits the patch
    with (
        Plotter() as helper,
        pytest.raises(RuntimeError, match=r"(?s)drawing the plots failed.*no axes today"),
    ):
        helper.submit(tables.step, tables.speed)
        helper.result()


def test_tables_that_cannot_reach_the_helper_fail_rather_than_wait(tmp_path: Path) -> None:
    tables = small_tables(tmp_path)
    unpicklable = tables.step.assign(note=[lambda: None] * len(tables.step))  # sent from a thread
    with Plotter() as helper:
        helper.submit(unpicklable, tables.speed)
        with pytest.raises(RuntimeError, match="could not be handed to the plot helper"):
            helper.result()
        process = helper._process
    assert not process.is_alive() and process.exitcode == 0


def test_leaving_without_asking_ends_the_helper() -> None:
    with Plotter() as helper:
        process = helper._process
    assert not process.is_alive() and process.exitcode == 0


def test_plots_of_unchanged_rows_are_reused_and_changed_rows_drawn_again(tmp_path: Path) -> None:
    tables = small_tables(tmp_path / "sweep")
    where = tmp_path / "cache"
    drawn, _ = plots.make_plots(tables.step, tables.speed, where)
    assert [p.png for p in drawn] == [p.png for p in plots.make_plots(tables.step, tables.speed)[0]]
    entries = sorted((where / cache.PLOTS).glob("*.pickle"))
    assert len(entries) == 4  # every figure of the family, the two it has no data for included
    assert {stat.S_IMODE(p.stat().st_mode) for p in (where, where / cache.PLOTS)} == {0o700}  # private
    # A reused plot is read, not drawn: plant other bytes under the per-host plot's key.
    for entry in entries:
        key, plot = pickle.loads(entry.read_bytes())
        if plot is not None and plot.name.endswith("_per_host.png"):
            entry.write_bytes(pickle.dumps((key, dataclasses.replace(plot, png=b"planted"))))
    again, _ = plots.make_plots(tables.step, tables.speed, where)
    assert [p.png for p in again] == [drawn[0].png, b"planted"]
    # One changed number is other rows: drawn again, and kept beside the old ones.
    step = tables.step.copy()
    step.loc[step.index[-1], "tps_ci_hi"] += 1.0
    changed, _ = plots.make_plots(step, tables.speed, where)
    assert changed[1].png.startswith(b"\x89PNG") and changed[0].png != drawn[0].png
    assert len(list((where / cache.PLOTS).glob("*.pickle"))) == 8
