"""The plot helper: same figures as drawing in-process, errors surface, never left running."""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import config, fact, run, write_sweep

from analysis import forks, plots
from analysis.load import load_sweeps
from analysis.plotter import Plotter
from analysis.render import Tables
from analysis.report import build_tables


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


def test_leaving_without_asking_ends_the_helper() -> None:
    with Plotter() as helper:
        process = helper._process
    assert not process.is_alive() and process.exitcode == 0
