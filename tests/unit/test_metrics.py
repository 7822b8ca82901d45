"""The metric table is the one declaration of a metric: every reader follows it, and the reference
in docs/results.md is what it generates (analysis.metrics)."""

from __future__ import annotations

import types
import typing
from typing import Any

import msgspec
import pandas as pd
import pytest
from factories import config, fact, run

from analysis import metrics, objectives
from analysis.facts import load
from analysis.facts.rows import FROM_FACT, run_numbers, run_rows
from analysis.facts.schema import Run, ServerLoad, SpecStats
from analysis.report import compare, metrics_doc, render

LOAD = ServerLoad(
    running_metric="sglang:num_running_reqs", queued_metric="sglang:num_queue_reqs", interval_s=0.5,
    samples=9, running_mean=47.5, running_median=48.0, running_max=48.0, queued_mean=15.5, queued_max=17.0,
)  # fmt: skip


def test_the_committed_reference_is_what_the_table_generates() -> None:
    text = metrics_doc.DOC.read_text(encoding="utf-8")
    assert metrics_doc.replaced(text) == text, (
        "docs/results.md's metrics are stale: run `python -m analysis metrics --write docs/results.md`"
    )
    assert all(f"| `{m.name}` |" in text for m in metrics.METRICS)


def test_a_page_without_the_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="no generated section"):
        metrics_doc.replaced("# Reading the results\n")


def _attribute_type(tp: Any, name: str) -> Any:
    """The type of attribute `name` of a msgspec struct type, None of an optional unwrapped."""
    hints = typing.get_type_hints(tp)
    assert name in hints, f"{tp.__name__} has no field {name}"
    found = hints[name]
    if isinstance(found, types.UnionType):
        found = next(a for a in typing.get_args(found) if a is not type(None))
    return found


def test_every_field_the_table_names_is_a_field_of_a_run() -> None:
    for m in metrics.FROM_FACT:
        assert m.field is not None
        tp: Any = Run
        for part in m.field.split("."):
            tp = _attribute_type(tp, part)
        assert tp in (int, float), f"{m.name}: {m.field} is a {tp}, not a number"
        assert (tp is int) == m.integer, f"{m.name}: integer={m.integer}, the fact holds a {tp.__name__}"


def test_each_run_figure_of_the_fact_reaches_its_run_row_as_the_fact_holds_it() -> None:
    measured = msgspec.structs.replace(
        run([100.0, 110.0], accept_length=2.5),
        spec=SpecStats(drafted=30, accepted=20, verify_steps=12, accept_length=2.5, accept_rate=0.66),
        achieved_concurrency=3.9, window_output_tokens=250.0, window_requests=1.5, server_load=LOAD,
    )  # fmt: skip
    row = run_rows("f.json", fact(config(2), [measured]))[0]
    assert {name: row[name] for name, _ in FROM_FACT} == {
        "accept_length": 2.5, "achieved_concurrency": 3.9, "server_running": 47.5, "server_queued": 15.5,
        "server_queued_max": 17.0, "accept_rate": 0.66, "drafted": 30, "accepted": 20, "verify_steps": 12,
        "window_output_tokens": 250.0, "window_requests": 1.5, "server_running_max": 48.0,
    }  # fmt: skip
    # No server count on a run: its figures are missing, not an error.
    bare = run_rows("f.json", fact(config(2), [run([100.0])]))[0]
    assert bare["server_running"] is None and bare["server_queued_max"] is None


def test_the_computed_run_figures_are_what_the_rows_compute() -> None:
    computed = {m.name for m in metrics.ROWS if m.field is None}
    made = set(run_numbers(run([100.0]))) | {"step_time_ms"}  # step times: from the fact's server_info
    assert computed <= made, computed - made
    # Every figure the rows make is declared (the rest of run_numbers' keys are counts and status).
    assert made - computed == {"n_requests", "n_errors", "run_ok", "failed", "cause", "message"}


def test_the_loader_types_every_run_figure() -> None:
    for m in metrics.ROWS:
        assert m.name in load.RUN_COLUMNS
        assert m.name in (load.INT_COLUMNS if m.integer else load.FLOAT_COLUMNS), m.name


def test_each_level_figure_has_one_column_placed_after_one_that_exists() -> None:
    columns = compare.TABLE_COLUMNS
    assert len(columns) == len(set(columns)), columns
    for m in metrics.LEVEL:
        at = columns.index(m.level_column)
        assert m.after is None or columns[at - 1] == m.after, (m.name, m.after)
    assert set(columns) - {m.level_column for m in metrics.LEVEL} == set(compare.OWN_COLUMNS)


def test_place_puts_a_column_after_its_neighbour_or_at_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    table = (
        metrics.Metric("a", "s", "lower", "", "", per_level="median", after="x"),
        metrics.Metric("b", "s", "lower", "", "", per_level="max"),
        metrics.Metric("c", "s", "lower", "", "", per_level="mean", after="a", column="c_ms", scale=1000.0),
    )
    monkeypatch.setattr(metrics, "LEVEL", table)
    assert metrics.place(["x", "y"]) == ["x", "a", "c_ms", "y", "b"]
    assert table[2].level_unit == "ms" and table[0].level_unit == "s"


def test_objectives_rank_on_metrics_where_higher_is_better() -> None:
    for o in objectives.OBJECTIVES.values():
        assert metrics.BY_NAME[o.column] is o.metric and o.metric.better == "higher", o.name
    assert objectives.THROUGHPUT.column in compare.TABLE_COLUMNS
    assert objectives.PER_USER.column in compare.TABLE_COLUMNS


def test_an_unknown_metric_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="known: decode_tps"):
        metrics.get("tok_per_s")


def test_a_metric_with_a_header_gets_a_terminal_column_after_in_flight() -> None:
    most = metrics.Metric("server_most", "requests", None, "", "", per_level="max", header="most", fmt=".0f")
    columns = render.step_columns([most])
    headers = [h for h, _, _ in columns]
    assert headers[headers.index("in flight") + 1] == "most"
    assert [h for h, _, _ in render.COLUMNS] == [h for h in headers if h != "most"]  # none today
    make = columns[headers.index("most")][2]
    assert make(pd.DataFrame({"server_most": [47.6, None]})) == ["48", render.MISSING]
