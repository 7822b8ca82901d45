"""The recommendation kept at `ingest` and compared by `regress`, over nights built from real CPU facts.

Nights are copies of tests/unit/fixtures/facts/t2probe as test_regress_real_facts.py builds them;
each also measured at a second load level here (the recorded runs again at concurrency 4: one
launch measures every level, so a level is more runs in the same fact). Under a TTFT SLO of
2200 ms the recorded facts meet it with s2 (p99 2106 ms) and miss it with the baseline (2309 ms),
so `recommend` picks s2; a night whose baseline prefills 10% faster at concurrency 4 meets it
there, and the baseline, whose speedup's interval holds 0, becomes the recommendation at that
level only.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
import sqlite3
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

from test_regress_real_facts import write_night

from analysis.cli import main

SLA = ("--sla-ttft-p99-ms", "2200")
MODEL = "/root/.cache/specsweep/models/gemma-3-270m-q4_k_m.gguf"
Alter = dict[tuple[int, str], Callable[[dict[str, Any]], None]]  # (concurrency, config) -> run change


def faster_prefill(run: dict[str, Any]) -> None:
    """Every request's time to first token 10% shorter, its decode as before."""
    for request in run["requests"]:
        request["e2e_s"] -= 0.1 * request["ttft_s"]
        request["ttft_s"] *= 0.9


def night(root: Path, n: int, levels: list[int], alter: Alter | None = None) -> Path:
    """Night `n` (write_night) measuring the recorded runs at each of `levels`, `alter`ed per level."""
    folder = write_night(root, n)
    for path in (folder / "localhost").glob("*.json"):
        fact = json.loads(path.read_text())
        runs = []
        for level in levels:
            for recorded in fact["runs"]:
                run = copy.deepcopy(recorded) | {"concurrency": level}
                (alter or {}).get((level, fact["config"]["id"]), lambda r: None)(run)
                runs.append(run)
        fact["runs"], fact["benchmark"]["concurrency"] = runs, levels
        path.write_text(json.dumps(fact))
    return folder


def ingest(db: Path, *nights: Path, sla: tuple[str, ...] = SLA) -> None:
    """`ingest` the nights through the CLI; it must succeed."""
    assert main(["ingest", *map(str, nights), "--history", str(db), *sla]) == 0


def regress(root: Path, db: Path) -> tuple[int, dict[str, Any], str, ET.Element]:
    """`regress` of the last night: (exit code, JSON, Markdown, JUnit root)."""
    files = {kind: root / f"regress.{kind}" for kind in ("json", "md", "xml")}
    argv = ["--json", files["json"], "--markdown", files["md"], "--junit", files["xml"]]
    code = main(["regress", "--history", str(db), *map(str, argv)])
    report = json.loads(files["json"].read_text())
    return code, report, files["md"].read_text(), ET.parse(files["xml"]).getroot()


def change(concurrency: int, kind: str, previous: str | None, latest: str | None) -> dict[str, Any]:
    """One entry of the JSON's "recommendations" list, in the keys compared here."""
    return {"host": "localhost", "engine": "llama_cpp", "model": MODEL, "concurrency": concurrency,
            "change": kind, "previous": previous, "latest": latest}  # fmt: skip


def listed(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON's recommendation changes, cut to the keys `change` gives."""
    return [{k: c[k] for k in change(0, "", None, None)} for c in report["recommendations"]]


def test_a_changed_recommendation_is_listed_and_fails_nothing(tmp_path: Path) -> None:
    nights = [night(tmp_path, 1, [1, 4]), night(tmp_path, 2, [1, 4], {(4, "baseline"): faster_prefill})]
    db = tmp_path / "history.sqlite"
    ingest(db, *nights)
    code, report, markdown, junit = regress(tmp_path, db)

    assert listed(report) == [change(4, "changed", "s2", "baseline")], report["recommendations"]
    entry = report["recommendations"][0]
    assert entry["previous_sweep"] == "n1" and entry["latest_sla"]["ttft_p99_ms"] == 2200.0, entry
    assert entry["reason"].startswith("speculation does not pay: the fastest, s2"), entry
    assert "### Recommendation changes (1; information, not a failure)" in markdown, markdown
    line = next(x for x in markdown.splitlines() if x.startswith("- localhost llama_cpp"))
    assert line.startswith(
        "- localhost llama_cpp gemma-3-270m-q4_k_m.gguf c4: s2 -> baseline (against n1;"
    ), line
    assert line.endswith("; TTFT p99 <= 2200 ms)"), line
    # Information only: every cell's tok/s is steady, so nothing fails and the exit status says so.
    assert code == 0 and report["counts"]["regressed"] == report["counts"]["failed"] == 0, report["counts"]
    assert (junit.get("failures"), junit.get("tests")) == ("0", "6")
    assert "recommend" not in ET.tostring(junit, encoding="unicode").lower()


def test_the_stored_recommendation_is_what_recommend_prints_for_the_night(tmp_path: Path) -> None:
    folder = night(tmp_path, 2, [1, 4], {(4, "baseline"): faster_prefill})
    db = tmp_path / "history.sqlite"
    ingest(db, folder)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["recommend", str(folder), "--format", "json", *SLA]) == 0
    printed = json.loads(out.getvalue())["by_concurrency"]
    with sqlite3.connect(db) as conn:
        stored = conn.execute(
            "SELECT concurrency, config, decode_tps, meets_sla, reason, sla_ttft_p99_ms FROM recommendations"
            " WHERE sweep_id = 'n2' ORDER BY concurrency"
        ).fetchall()
    expected = [
        (int(level), v["config"], v["tok_s"], int(v["meets_sla"]), v["reason"], 2200.0)
        for level, v in printed.items()
    ]
    assert stored == expected and [r[1] for r in stored] == ["s2", "baseline"], (stored, printed)


def test_new_and_gone_levels_are_listed(tmp_path: Path) -> None:
    nights = [night(tmp_path, 1, [1, 4]), night(tmp_path, 2, [1, 16])]
    db = tmp_path / "history.sqlite"
    ingest(db, *nights)
    code, report, markdown, _ = regress(tmp_path, db)
    assert listed(report) == [change(4, "gone", "s2", None), change(16, "new", None, "s2")], report
    assert "- localhost llama_cpp gemma-3-270m-q4_k_m.gguf c4 (level gone): was s2 (against n1;" in markdown
    assert "- localhost llama_cpp gemma-3-270m-q4_k_m.gguf c16 (new level): s2 (against n1;" in markdown
    section = markdown.split("### Recommendation changes")[1]
    assert re.findall(r" c(\d+)[ :]", section) == ["4", "16"], section  # c1 kept s2: not listed
    # The verdicts list the cells of c4 as missing and c16's as new: neither fails the night.
    assert code == 0 and report["counts"]["missing"] == report["counts"]["new"] == 3, report["counts"]


def test_without_the_sla_at_ingest_the_baseline_is_kept_and_nothing_is_listed(tmp_path: Path) -> None:
    nights = [night(tmp_path, 1, [1, 4]), night(tmp_path, 2, [1, 4], {(4, "baseline"): faster_prefill})]
    db = tmp_path / "history.sqlite"
    ingest(db, *nights, sla=())
    code, report, markdown, _ = regress(tmp_path, db)
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT DISTINCT config, sla_ttft_p99_ms FROM recommendations").fetchall()
    assert stored == [("baseline", None)], stored  # speculation does not pay at any level, either night
    assert (code, report["recommendations"]) == (0, []), report["recommendations"]
    assert "Recommendation changes" not in markdown, markdown
