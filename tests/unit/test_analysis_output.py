"""`report --out`: PNG plots, a self-contained HTML page, Markdown; and the loader's row cache."""

from __future__ import annotations

import base64
import re
import stat
import struct
from pathlib import Path

import pandas as pd
import pytest
from factories import config, crash, fact, grid_config, run, write_sweep

from analysis import cache
from analysis.cli import main
from analysis.facts import load
from analysis.facts.load import load_sweeps
from analysis.facts.schema import Engine
from analysis.report import html
from analysis.report.cli import build_tables

PNG = b"\x89PNG\r\n\x1a\n"


def grid_sweep(root: Path, hosts: tuple[str, ...] = ("gpu-a", "gpu-b")) -> Path:
    """Two hosts, a baseline and a steps x top-k grid, 3 repeats each, the second host 10% slower."""
    facts = []
    for h, host in enumerate(hosts):
        scale = 1.0 - 0.1 * h
        cells = [(config(), 88.8, None)] + [
            (
                grid_config(s, k, s * k + 1 if k > 1 else s + 1),
                88.8 * (1 + 0.03 * s - 0.02 * k),
                1 + 0.6 * s / k,
            )
            for s in (1, 2, 3)
            for k in (1, 2)
        ]
        for cfg, tps, accept in cells:
            runs = [
                run([tps * scale * f], repeat=i, accept_length=accept) for i, f in enumerate((1, 1.01, 0.99))
            ]
            facts.append(fact(cfg, runs, host=host))
    return write_sweep(root, facts)


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    assert data.startswith(PNG), data[:8]
    return struct.unpack(">II", data[16:24])


def test_out_writes_plots_markdown_and_self_contained_html(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "out"
    assert main(["report", str(grid_sweep(tmp_path)), "--out", str(out)]) == 0
    pngs = sorted(out.glob("*.png"))
    kinds = sorted(p.name.rsplit("_c1_", 1)[1] for p in pngs)
    assert kinds == ["accept_vs_steps.png", "per_host.png", "speedup_heatmap.png", "tokps_vs_steps.png"], pngs
    for p in pngs:
        width, height = png_size(p.read_bytes())
        assert width >= 400 and height >= 250, (p.name, width, height)
    html = (out / "report.html").read_text(encoding="utf-8")
    embedded = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert sorted(base64.b64decode(e) for e in embedded) == sorted(p.read_bytes() for p in pngs)
    # Opens offline: nothing is fetched, from anywhere.
    assert not re.search(r"https?:|(src|href)\s*=\s*['\"](?!data:)|<script|<link|@import|url\(", html, re.I)
    assert "<style>" in html and "s3-k2-d7" in html and "gpu-b" in html
    assert html.count('<tr class="best">') == 2, "one best row per host's table"
    md = (out / "report.md").read_text(encoding="utf-8")
    assert all(f"]({p.name})" in md for p in pngs), md
    assert sorted(p.name for p in out.iterdir() if p.suffix != ".png") == ["report.html", "report.md"]
    assert "wrote 6 files" in capsys.readouterr().err


def test_html_escapes_what_the_facts_say_and_marks_noisy_rows(tmp_path: Path) -> None:
    engine = Engine(name="sglang", model="m<b>&amp;</b>", launcher="nohup")
    facts = [
        fact(config(), [run([90.0], repeat=r) for r in range(3)], engine=engine),
        fact(config(2), [run([t], repeat=r) for r, t in enumerate((80.0, 100.0, 120.0))], engine=engine),
        fact(config(3), [], failure=crash("oom<script>alert(1)</script>"), engine=engine),
    ]
    out = tmp_path / "out"
    assert main(["report", str(write_sweep(tmp_path, facts)), "--out", str(out)]) == 0
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "<script" not in html and "<b>" not in html
    assert "1 oom&lt;script&gt;alert(1)&lt;/script&gt;</td>" in html, "a cell"
    assert "m&lt;b&gt;&amp;amp;&lt;/b&gt;" in html, "a title"
    noisy = re.findall(r'<tr class="([^"]*)"><td>[^<]*</td><td>s2</td>', html)
    assert noisy == ["best noisy"], noisy
    assert '<td class="r cv">20.0%!</td>' in html


def test_compiled_templates_are_kept_privately_and_one_that_is_broken_is_compiled_again(
    tmp_path: Path, analysis_cache: Path
) -> None:
    tables = build_tables(load_sweeps([grid_sweep(tmp_path)]))
    page = html.render_html(tables, [], ["a.json: <not json>"], "a note")
    kept = sorted((analysis_cache / cache.TEMPLATES).iterdir())
    assert len(kept) == 2, kept  # the page's template and the tables'
    assert stat.S_IMODE((analysis_cache / cache.TEMPLATES).stat().st_mode) == 0o700
    for entry in kept:
        entry.write_bytes(b"not jinja2's")
    html._environment.cache_clear()  # as a new process would: read what is kept
    assert html.render_html(tables, [], ["a.json: <not json>"], "a note") == page
    assert all(entry.read_bytes() != b"not jinja2's" for entry in kept), "kept again"


def test_heatmap_and_per_host_plots_need_a_grid_and_several_hosts(tmp_path: Path) -> None:
    facts = [fact(config(s), [run([90.0 + (s or 0)], repeat=r) for r in range(2)]) for s in (None, 1, 2)]
    out = tmp_path / "out"
    assert main(["report", str(write_sweep(tmp_path, facts)), "--out", str(out)]) == 0
    assert sorted(p.name.rsplit("_c1_", 1)[1] for p in out.glob("*.png")) == ["tokps_vs_steps.png"]


def test_format_html_prints_the_page_with_its_plots(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["report", str(grid_sweep(tmp_path, hosts=("gpu-a",))), "--format", "html"]) == 0
    page = capsys.readouterr().out
    assert page.startswith("<!DOCTYPE html>") and page.count("data:image/png;base64,") == 3


def test_cached_rows_match_a_fresh_parse_and_follow_file_changes(
    tmp_path: Path, analysis_cache: Path
) -> None:
    sweep = grid_sweep(tmp_path)
    fresh = load_sweeps([sweep], use_cache=False)
    first = load_sweeps([sweep])
    assert list(analysis_cache.glob("*.pickle")), "the first load fills the cache"
    again = load_sweeps([sweep])
    pd.testing.assert_frame_equal(again.runs, fresh.runs)
    pd.testing.assert_frame_equal(again.requests, fresh.requests)
    pd.testing.assert_frame_equal(first.runs, fresh.runs)
    # A rewritten fact is read again; a removed one disappears; a broken one is reported every time.
    target = sweep / "gpu-a" / "s2-k1-d3.json"
    write_sweep(tmp_path, [fact(grid_config(2, 1, 3), [run([55.5])], host="gpu-a")])
    (sweep / "gpu-b" / "baseline.json").unlink()
    (sweep / "gpu-b" / "broken.json").write_text("{", encoding="utf-8")
    for _ in range(2):
        result = load_sweeps([sweep])
        runs = result.runs.set_index(["host", "config_id"])
        assert runs.loc[("gpu-a", "s2-k1-d3"), "decode_tps"] == 55.5 and target.exists()
        assert ("gpu-b", "baseline") not in runs.index
        assert [p.name for p, _ in result.problems] == ["broken.json"]
        # Old rows and new ones joined (categories merged, not rebuilt) are what one parse gives.
        reparsed = load_sweeps([sweep], use_cache=False)
        for joined, parsed in ((result.runs, reparsed.runs), (result.requests, reparsed.requests)):
            pd.testing.assert_frame_equal(by_file(joined), by_file(parsed), check_categorical=False)


def by_file(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows in file-name order (a file's own rows keep theirs), without the load-order fact id."""
    order = rows.assign(file=rows["path"].astype(str)).sort_values(["file", "run_index"], kind="stable")
    return order.drop(columns=["file", "fact_id"]).reset_index(drop=True)


def test_parallel_parse_gives_the_same_frames(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sweep = grid_sweep(tmp_path)
    serial = load_sweeps([sweep], use_cache=False)
    monkeypatch.setattr(load, "PARALLEL_MIN", 2)
    monkeypatch.setattr(load.os, "cpu_count", lambda: 2)
    parallel = load_sweeps([sweep], use_cache=False)
    for split, whole in ((parallel.runs, serial.runs), (parallel.requests, serial.requests)):
        pd.testing.assert_frame_equal(by_file(split), by_file(whole), check_categorical=False)
