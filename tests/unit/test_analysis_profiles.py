"""The env-profile view: a row per step count, a column group per profile, in every format."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pandas as pd
import pytest
from factories import config, crash, fact, run, write_sweep

from analysis.cli import main
from analysis.facts.load import load_sweeps
from analysis.report.cli import build_tables
from analysis.report.render import render
from analysis.sweep.config import make


def measured(steps: int | None, profile: str, tps: float, step_s: float | None = None, **kw: object):
    """A fact of one config under one profile: two repeats at `tps`, its step time if given."""
    info = {"step_time_dict": {"1": [step_s, step_s]}} if step_s else None
    return fact(config(steps, profile), [run([tps], repeat=r) for r in range(2)], server_info=info, **kw)


def seed_case(root: Path) -> Path:
    """The seed case's NCCL question: library defaults against LL + Ring, each value distinct."""
    facts = [
        measured(None, "nccl_default", 80.0, 0.0287),
        measured(2, "nccl_default", 84.0, 0.0301),
        measured(4, "nccl_default", 83.0, 0.0335),
        measured(None, "nccl_ll_ring", 88.8, 0.0217),
        measured(2, "nccl_ll_ring", 94.0, 0.0229),
        measured(4, "nccl_ll_ring", 91.0, 0.0251),
    ]
    return write_sweep(root, facts)


def block(text: str, heading: str) -> list[list[str]]:
    """The rows (cells split on runs of spaces) of the text-report block whose title starts so."""
    lines = text.split("\n\n")
    found = [b.splitlines() for b in lines if b.startswith(heading)]
    assert len(found) == 1, f"expected one block {heading!r} in:\n{text}"
    table = [line for line in found[0][1:] if not line.startswith("per env profile")]
    return [re.split(r"\s{2,}", line.strip()) for line in table]


def test_each_value_sits_under_its_step_count_and_profile(tmp_path: Path) -> None:
    wide = build_tables(load_sweeps([seed_case(tmp_path)])).profiles
    assert list(wide.index.get_level_values("config")) == ["baseline", "s2", "s4"]
    assert list(wide.columns) == [
        ("decode_tps", "nccl_default"),
        ("decode_tps", "nccl_ll_ring"),
        ("step_ms", "nccl_default"),
        ("step_ms", "nccl_ll_ring"),
    ]
    cells = wide.droplevel(["sweep_id", "host", "engine", "model", "workload", "concurrency"])
    assert cells.loc["baseline"].tolist() == pytest.approx([80.0, 88.8, 28.7, 21.7])
    assert cells.loc["s2"].tolist() == pytest.approx([84.0, 94.0, 30.1, 22.9])
    assert cells.loc["s4"].tolist() == pytest.approx([83.0, 91.0, 33.5, 25.1])


def test_text_report_shows_the_seed_case_table(tmp_path: Path) -> None:
    text = render(build_tables(load_sweeps([seed_case(tmp_path)])), "text")
    rows = block(text, "env profiles | sweep sweep-1 | host gpu-a | sglang Kimi-K2.5 | concurrency 1")
    assert rows == [
        [
            "config",
            "nccl_default tok/s",
            "nccl_default step ms",
            "nccl_ll_ring tok/s",
            "nccl_ll_ring step ms",
        ],
        ["baseline", "80.0", "28.7", "88.8", "21.7"],
        ["s2", "84.0", "30.1", "94.0", "22.9"],
        ["s4", "83.0", "33.5", "91.0", "25.1"],
    ]


def test_default_profile_comes_first_and_a_missing_cell_is_a_dash(tmp_path: Path) -> None:
    facts = [
        measured(None, "nccl_ll_ring", 88.8),
        measured(2, "nccl_ll_ring", 94.0),
        measured(None, "default", 80.0),
        measured(2, "default", 84.0),
        measured(3, "default", 86.0),  # not measured under nccl_ll_ring
    ]
    text = render(build_tables(load_sweeps([write_sweep(tmp_path, facts)])), "text")
    rows = block(text, "env profiles |")
    # No step time recorded anywhere in the group: no step-ms columns at all.
    assert rows == [
        ["config", "default tok/s", "nccl_ll_ring tok/s"],
        ["baseline", "80.0", "88.8"],
        ["s2", "84.0", "94.0"],
        ["s3", "86.0", "–"],
    ]


def test_one_block_per_host_and_concurrency_with_their_own_profiles(tmp_path: Path) -> None:
    facts = [
        fact(config(None, "default"), [run([80.0]), run([300.0], concurrency=4)]),
        fact(config(None, "nccl_ll_ring"), [run([88.0]), run([330.0], concurrency=4)]),
        measured(None, "default", 70.0, host="gpu-b"),
        measured(None, "nccl_ll_ring", 77.0, host="gpu-b"),
        measured(None, "default", 60.0, host="gpu-c"),  # one profile: no block
    ]
    tables = build_tables(load_sweeps([write_sweep(tmp_path, facts)]))
    text = render(tables, "text")
    assert block(text, "env profiles | sweep sweep-1 | host gpu-a | sglang Kimi-K2.5 | concurrency 1")[1] == [
        "baseline",
        "80.0",
        "88.0",
    ]
    assert block(text, "env profiles | sweep sweep-1 | host gpu-a | sglang Kimi-K2.5 | concurrency 4")[1] == [
        "baseline",
        "300.0",
        "330.0",
    ]
    assert block(text, "env profiles | sweep sweep-1 | host gpu-b")[1] == ["baseline", "70.0", "77.0"]
    assert "host gpu-c" not in "".join(t for t in text.split("\n\n") if t.startswith("env profiles"))
    assert len(tables.profiles) == 3


def test_a_single_profile_sweep_has_no_profile_view(tmp_path: Path) -> None:
    tables = build_tables(load_sweeps([write_sweep(tmp_path, [measured(None, "default", 80.0)])]))
    assert tables.profiles.empty and "env profiles" not in render(tables, "text")
    assert "env profiles" not in render(tables, "markdown")


def test_markdown_and_html_carry_the_profile_view(tmp_path: Path) -> None:
    sweep = seed_case(tmp_path)
    md = render(build_tables(load_sweeps([sweep])), "markdown")
    assert "| config | nccl_default tok/s | nccl_default step ms | nccl_ll_ring tok/s |" in md
    assert "| s2 | 84.0 | 30.1 | 94.0 | 22.9 |" in md
    out = tmp_path / "out"
    assert main(["report", str(sweep), "--out", str(out)]) == 0
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "<h2>Env profiles</h2>" in html
    cells = "".join(f'<td class="r">{v}</td>' for v in ("84.0", "30.1", "94.0", "22.9"))
    assert f"<tr><td>s2</td>{cells}</tr>" in html
    assert "| s4 | 83.0 | 33.5 | 91.0 | 25.1 |" in (out / "report.md").read_text(encoding="utf-8")


def test_csv_keeps_the_long_form_the_view_pivots(tmp_path: Path) -> None:
    step = pd.read_csv(io.StringIO(render(build_tables(load_sweeps([seed_case(tmp_path)])), "csv")))
    s2 = step[step["steps"] == 2].set_index("env_profile")
    assert s2.loc["nccl_ll_ring", "decode_tps"] == pytest.approx(94.0)
    assert s2.loc["nccl_default", "step_ms"] == pytest.approx(30.1)


def test_grid_points_sharing_a_step_count_keep_rows_of_their_own(tmp_path: Path) -> None:
    def point(topk: int, draft: int, profile: str, tps: float):
        return fact(make(2, topk, draft, "EAGLE3", profile), [run([tps], repeat=r) for r in range(2)])

    facts = [
        point(1, 3, "default", 90.0),
        point(2, 5, "default", 95.0),
        point(1, 3, "nccl_ll_ring", 91.0),
        point(2, 5, "nccl_ll_ring", 97.0),
    ]
    rows = block(render(build_tables(load_sweeps([write_sweep(tmp_path, facts)])), "text"), "env profiles |")
    assert rows[1:] == [["s2-k1-d3", "90.0", "91.0"], ["s2-k2-d5", "95.0", "97.0"]]


def test_a_profile_whose_configs_all_failed_keeps_its_column(tmp_path: Path) -> None:
    facts = [
        measured(None, "default", 80.0),
        measured(2, "default", 84.0),
        fact(config(None, "nccl_ll_ring"), [], failure=crash()),
        fact(config(2, "nccl_ll_ring"), [], failure=crash()),
    ]
    rows = block(render(build_tables(load_sweeps([write_sweep(tmp_path, facts)])), "text"), "env profiles |")
    assert rows == [
        ["config", "default tok/s", "nccl_ll_ring tok/s"],
        ["baseline", "80.0", "–"],
        ["s2", "84.0", "–"],
    ]
