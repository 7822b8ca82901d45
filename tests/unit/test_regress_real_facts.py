"""`regress` over nights built from real facts of a CPU sweep (llama.cpp, ngram speculation).

Each night is a copy of tests/unit/fixtures/facts/t2probe with its own sweep id and start time and
a small, fixed night-to-night jitter of the inter-token timing; later nights are altered as a
regression would alter them: slower verify steps stretch every inter-token gap, a weaker draft
changes the accept counters (more verify steps for the same tokens) and the timing with them.
The outputs are checked as their consumers read them, the textfile by promtool itself.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from analysis.cli import main
from analysis.nightly.judge import HARMFUL
from analysis.nightly.settings import Settings

FIXTURE = Path(__file__).parent / "fixtures" / "facts" / "t2probe" / "localhost"
DAY = 86400.0
JITTER = [0.004, -0.003, 0.002, -0.004, 0.003, -0.001, 0.001, -0.002, 0.0, 0.002]  # tok/s, per night


def slow_steps(fact: dict[str, Any], factor: float) -> None:
    """Every verify step `factor` x as long: gaps stretch, tok/s falls, counters stay; the run lasts
    as much longer as its requests (one at a time at concurrency 1), so its throughput falls too."""
    for run in fact["runs"]:
        longer = 0.0
        for request in run["requests"]:
            request["itl_s"] = [gap * factor for gap in request["itl_s"]]
            decode = request["e2e_s"] - request["ttft_s"]
            longer += decode * (factor - 1.0)
            request["e2e_s"] = request["ttft_s"] + decode * factor
            request["decode_tps"] /= factor
        run["duration_s"] += longer / run["concurrency"]


def throughput_change(config: str, factor: float) -> float:
    """The % change of a config's median run throughput (tokens / duration) when slow_steps(factor)."""
    fact = json.loads((FIXTURE / f"{config}.json").read_text())
    before = [r["duration_s"] for r in fact["runs"]]
    slow_steps(fact, factor)
    ratios = sorted(b / r["duration_s"] for b, r in zip(before, fact["runs"], strict=True))
    return 100.0 * (ratios[len(ratios) // 2] - 1.0)


def weaker_draft(fact: dict[str, Any], factor: float) -> None:
    """Accept length x `factor` for the same tokens: more verify steps of the same time each."""
    for run in fact["runs"]:
        spec = run["spec"]
        if spec["accept_length"] is None:
            continue
        tokens = spec["accepted"] + spec["verify_steps"]  # accept length = tokens / verify steps
        steps = round(spec["verify_steps"] / factor)
        spec.update(verify_steps=steps, accepted=tokens - steps, accept_length=tokens / steps)
    slow_steps(fact, 1.0 / factor)


def write_night(root: Path, night: int, alter: dict[str, Any] | None = None, **changes: Any) -> Path:
    """Night `night`: the fixture facts, jittered, then `alter`ed per config, then fields `changes`d."""
    folder = root / f"n{night}"
    for path in sorted(FIXTURE.glob("*.json")):
        fact = json.loads(path.read_text())
        fact["sweep_id"] = folder.name
        for key in ("started_at", "ready_at", "finished_at"):
            fact["timings"][key] += night * DAY
        slow_steps(fact, 1.0 / (1.0 + JITTER[night % len(JITTER)]))
        for step in (alter or {}).get(fact["config"]["id"], ()):
            step(fact)
        for dotted, value in changes.items():
            *parents, leaf = dotted.split("__")
            target = fact
            for parent in parents:
                target = target[parent]
            target[leaf] = value
        out = folder / "localhost" / path.name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(fact))
    return folder


def ingest_and_regress(root: Path, *nights: Path, extra: tuple[str, ...] = ()) -> tuple[int, dict[str, Any]]:
    """Ingest the nights, judge the last: (exit code, the JSON report's cells by config)."""
    db = root / "history.sqlite"
    assert main(["ingest", *map(str, nights), "--history", str(db)]) == 0
    out = root / "regress.json"
    code = main(["regress", "--history", str(db), "--json", str(out), *extra])
    report = json.loads(out.read_text())
    return code, {c["config"]: c for c in report["cells"]}


def draft_regressed(code: int, cells: dict[str, Any], found: tuple[str, str], accept_pct: float) -> None:
    """The speculative configs regressed on acceptance, `found` by (rule, changed_at), their accept
    length `accept_pct` % changed; the config without speculation unchanged."""
    assert code == 1
    assert cells["baseline"]["verdict"] == "unchanged", cells["baseline"]
    for config in ("s2", "s4"):
        cell = cells[config]
        got = (cell["verdict"], cell["rule"], cell["component"], cell["changed_at"])
        assert got == ("regressed", found[0], "acceptance", found[1]), cell
        assert cell["accept_change_pct"] == pytest.approx(accept_pct, abs=0.5), cell


def test_steady_nights_of_real_facts_are_unchanged(tmp_path: Path) -> None:
    code, cells = ingest_and_regress(tmp_path, *(write_night(tmp_path, n) for n in range(1, 9)))
    assert code == 0
    assert {c: (v["verdict"], v["rule"]) for c, v in cells.items()} == {
        c: ("unchanged", "change_point") for c in ("baseline", "s2", "s4")
    }, cells


def test_slower_verify_steps_regress_every_config_with_component_step_time(tmp_path: Path) -> None:
    slow = {c: [lambda f: slow_steps(f, 1.12)] for c in ("baseline", "s2", "s4")}
    nights = [write_night(tmp_path, n, slow if n >= 6 else None) for n in range(1, 9)]
    code, cells = ingest_and_regress(tmp_path, *nights)
    assert code == 1
    for config, cell in cells.items():
        got = (cell["verdict"], cell["rule"], cell["component"], cell["changed_at"], cell["step_source"])
        assert got == ("regressed", "change_point", "step_time", "n6", "derived"), (config, cell)
        # Throughput (the objective) falls less than decode tok/s: the first tokens' wait is as before.
        assert cell["change_lo_pct"] < throughput_change(config, 1.12) < cell["change_hi_pct"] < 0.0, cell
        assert cell["step_change_pct"] == pytest.approx(12.0, abs=1.0), cell
    assert cells["s2"]["accept_change_pct"] == pytest.approx(0.0, abs=1e-9)


def test_a_weaker_draft_regresses_the_speculative_configs_with_component_acceptance(tmp_path: Path) -> None:
    weak = {c: [lambda f: weaker_draft(f, 0.85)] for c in ("s2", "s4")}
    nights = [write_night(tmp_path, n, weak if n >= 7 else None) for n in range(1, 10)]
    draft_regressed(*ingest_and_regress(tmp_path, *nights), ("change_point", "n7"), -15.0)


def test_a_collapsed_draft_is_caught_by_the_gate_although_tok_s_barely_moved(tmp_path: Path) -> None:
    def collapse(fact: dict[str, Any]) -> None:
        """Each run's accept length to 1.05, its verify step as much cheaper: tok/s as before."""
        for run in fact["runs"]:
            factor = 1.05 / run["spec"]["accept_length"]
            weaker_draft({"runs": [run]}, factor)
            slow_steps({"runs": [run]}, factor)

    nights = [write_night(tmp_path, n, {"s2": [collapse]} if n == 8 else None) for n in range(1, 9)]
    code, cells = ingest_and_regress(tmp_path, *nights)
    s2 = cells["s2"]
    assert code == 1
    assert (s2["verdict"], s2["rule"], s2["component"], s2["changed_at"]) == (
        "regressed", "accept_gate", "acceptance", "n8"
    ), s2  # fmt: skip
    assert s2["accept_length"] < 1.2 and s2["accept_change_pct"] < -50.0, s2
    assert {cells["baseline"]["verdict"], cells["s4"]["verdict"]} == {"unchanged"}


def test_the_diff_names_what_changed_on_the_night_of_the_change(tmp_path: Path) -> None:
    slow = {c: [lambda f: slow_steps(f, 1.15)] for c in ("baseline", "s2", "s4")}
    identity = {"path": "/models/gemma.gguf", "bytes": 253_000_000, "mtime": 1.7e9, "digest": "aa11"}
    upgraded = {
        "engine__version": "b4000",
        "engine__model_identity": {**identity, "digest": "bb22"},
        "launch__env": {"NCCL_ALGO": "Ring", "OMP_NUM_THREADS": "2"},
        "suite__git_rev": "f" * 40,
    }
    nights = [
        write_night(tmp_path, n, slow if n >= 7 else None, engine__model_identity=identity)
        if n < 7
        else write_night(tmp_path, n, slow, **upgraded)
        for n in range(1, 9)
    ]
    # The argv too: two threads became four from the night of the change on.
    for path in (p for night in nights[-2:] for p in (night / "localhost").glob("*.json")):
        fact = json.loads(path.read_text())
        fact["launch"]["argv"][fact["launch"]["argv"].index("-t") + 1] = "4"
        path.write_text(json.dumps(fact))
    code, cells = ingest_and_regress(tmp_path, *nights)
    s2 = cells["s2"]
    assert (code, s2["verdict"], s2["changed_at"], s2["previous_version"]) == (1, "regressed", "n7", None)
    changes = {c["field"]: (c["before"], c["after"]) for c in s2["provenance_diff"]}
    assert changes == {
        "engine_version": ("b0-unknown", "b4000"),
        "model_identity digest": ("aa11", "bb22"),
        "env NCCL_ALGO": (None, "Ring"),
        "env OMP_NUM_THREADS": (None, "2"),
        "argv": ("-t 2", "-t 4"),
        "suite_rev": ("a739d146cefee7d785cd15bbff743a37efdf138e", "f" * 40),
    }, changes


def test_json_markdown_junit_and_prometheus_carry_the_same_verdicts(tmp_path: Path) -> None:
    slow = {"s4": [lambda f: slow_steps(f, 1.2)]}
    nights = [write_night(tmp_path, n, slow if n >= 8 else None) for n in range(1, 9)]
    db = tmp_path / "history.sqlite"
    assert main(["ingest", *map(str, nights), "--history", str(db)]) == 0
    files = {kind: tmp_path / f"regress.{kind}" for kind in ("json", "md", "xml", "prom")}
    outputs = [f"--{flag}={files[kind]}" for flag, kind in
               (("json", "json"), ("markdown", "md"), ("junit", "xml"), ("prometheus", "prom"))]  # fmt: skip
    code = main(["regress", "--history", str(db), *outputs])
    assert code == 1
    report = json.loads(files["json"].read_text())
    assert (
        report["sweep"] == "n8"
        and report["counts"]["regressed"] == 1
        and report["settings"]["alpha"] == Settings().alpha
    )
    regressed = {c["config"] for c in report["cells"] if c["verdict"] == "regressed"}
    assert regressed == {"s4"}
    # The three cells' nights carry the same jitter: the recent-drop test shares their noise of
    # tok/s. Two of them are speculative, too few to share the noise of accept length and step time.
    shared = report["noise"]["tps"]
    assert shared["cells"] == 3 and 0 < shared["cv_pct"] < 1, report["noise"]
    assert report["noise"]["accept"] == report["noise"]["step"] == {"cells": 0, "cv_pct": None, "df": 0.0}
    markdown = files["md"].read_text()
    assert "**1 regression(s)**" in markdown and "### Regressions (1)" in markdown
    assert f"noise of the cells judged with it: tok/s CV {shared['cv_pct']:.1f}% (3 cells, worth" in markdown
    assert "| localhost | llama_cpp | b0-unknown | gemma-3-270m-q4_k_m.gguf | s4 | 1 |" in markdown, markdown
    junit = ET.parse(files["xml"]).getroot()
    failing = [c.get("name", "").split()[0] for c in junit.iter("testcase") if c.find("failure") is not None]
    assert failing == ["s4"] and junit.get("tests") == "3"

    text = files["prom"].read_text()
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: apt-get install prometheus (scripts/setup.sh installs it)"
    check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True,
                           timeout=60, check=False)  # fmt: skip
    assert check.returncode == 0 and not (check.stdout + check.stderr).strip(), check
    labels = (
        'host="localhost",engine="llama_cpp",model="/root/.cache/specsweep/models/gemma-3-270m-q4_k_m.gguf"'
    )
    assert (
        f'specsweep_regress_verdict{{{labels},config="s4",concurrency="1",verdict="regressed"}} 1\n' in text
    )
    assert (
        f'specsweep_regress_verdict{{{labels},config="s2",concurrency="1",verdict="unchanged"}} 1\n' in text
    )
    assert (
        f'specsweep_regress_component{{{labels},config="s4",concurrency="1",component="step_time"}} 1\n'
        in text
    )
    assert f'specsweep_accept_length{{{labels},config="baseline"' not in text  # no speculation: no sample
    samples = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    s4_tps = samples[f'specsweep_decode_tokens_per_second{{{labels},config="s4",concurrency="1"}}']
    assert float(s4_tps) == pytest.approx(
        next(c for c in report["cells"] if c["config"] == "s4")["latest_tps"]
    )
    assert float(samples["specsweep_regress_night_start_timestamp_seconds"]) > 8 * DAY


def test_noise_own_judges_each_cell_on_its_own_nights(tmp_path: Path) -> None:
    slow = {"s4": [lambda f: slow_steps(f, 1.2)]}
    nights = [write_night(tmp_path, n, slow if n >= 8 else None) for n in range(1, 9)]
    db = tmp_path / "history.sqlite"
    assert main(["ingest", *map(str, nights), "--history", str(db)]) == 0
    out = tmp_path / "regress.json"
    assert main(["regress", "--history", str(db), "--noise", "own", "--json", str(out)]) == 1
    report = json.loads(out.read_text())
    none = {"cells": 0, "cv_pct": None, "df": 0.0}
    assert report["noise"] == dict.fromkeys(HARMFUL, none) and report["settings"]["noise"] == "own"
    assert {c["config"] for c in report["cells"] if c["verdict"] == "regressed"} == {"s4"}


def test_a_small_acceptance_drop_is_found_on_its_second_night_through_the_noise_of_tok_s(
    tmp_path: Path,
) -> None:
    # Timing jitter seven times the usual (tok/s CV near 2%), accept length as steady as the real
    # counters make it, and a draft 4.5% weaker from night 11 on (about 3% of throughput: decoding is
    # some 70% of a request's time here): two nights in, the accept length moved and carries the
    # drop through the timing noise.
    nights = []
    for n in range(1, 13):
        noisy = [lambda f, n=n: slow_steps(f, 1.0 + 6.0 * JITTER[n % len(JITTER)])]
        weak = [lambda f: weaker_draft(f, 0.955)] if n >= 11 else []
        nights.append(write_night(tmp_path, n, {"baseline": noisy, "s2": noisy + weak, "s4": noisy + weak}))
    draft_regressed(*ingest_and_regress(tmp_path, *nights), ("recent_drop", "n11"), -4.5)
