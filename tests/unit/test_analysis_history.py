"""History store (`ingest`) and regression verdicts (`regress`): exit codes, Markdown, JUnit."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from factories import config, crash, fact, run, write_sweep

from analysis.cli import main
from analysis.facts.schema import Engine

REPO = Path(__file__).resolve().parents[2]


def nightly(root: Path, sweep: str, night: int, tps: dict[str, float], *, version: str = "0.5.0",
            host: str = "gpu-a", failed: tuple[str, ...] = ()) -> Path:  # fmt: skip
    """One sweep folder: each config at the given tok/s over 3 tight repeats; `failed` crashed."""
    engine = Engine(name="sglang", model="Kimi-K2.5", launcher="nohup", version=version)
    facts = [
        fact(
            config(None if name == "baseline" else int(name[1:])),
            [run([t * f], repeat=i) for i, f in enumerate((1.0, 1.002, 0.998))],
            sweep_id=sweep, host=host, engine=engine, started_at=1e9 + night * 86400,
        )
        for name, t in tps.items()
    ] + [
        fact(config(int(name[1:])), [], failure=crash(), sweep_id=sweep, host=host, engine=engine,
             started_at=1e9 + night * 86400)
        for name in failed
    ]  # fmt: skip
    return write_sweep(root, facts)


def ingest_all(db: Path, *sweeps: Path) -> None:
    """Ingest sweep folders through the CLI entry point; each must succeed."""
    assert main(["ingest", *map(str, sweeps), "--history", str(db)]) == 0


def regress(db: Path, tmp_path: Path, *extra: str) -> tuple[int, str, ET.Element]:
    """Run `regress` in-process: (exit code, Markdown written, JUnit root)."""
    md, junit = tmp_path / "summary.md", tmp_path / "junit.xml"
    code = main(["regress", "--history", str(db), "--markdown", str(md), "--junit", str(junit), *extra])
    return code, md.read_text(encoding="utf-8"), ET.parse(junit).getroot()


def case(junit: ET.Element, config_id: str, host: str = "gpu-a") -> ET.Element:
    """The JUnit testcase of one config on one host."""
    found = [c for c in junit.iter("testcase") if c.get("name", "").startswith(f"{config_id} ")
             and c.get("classname") == f"specsweep.{host}"]  # fmt: skip
    assert len(found) == 1, ET.tostring(junit, encoding="unicode")
    return found[0]


def test_ingest_twice_adds_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = nightly(tmp_path, "n1", 1, {"baseline": 90.0, "s2": 100.0}, failed=("s3",))
    db = tmp_path / "h.sqlite"
    ingest_all(db, sweep)
    assert "n1: 7 run(s) added, 0 already" in capsys.readouterr().out
    ingest_all(db, sweep)
    assert "n1: 0 run(s) added, 7 already" in capsys.readouterr().out
    with sqlite3.connect(db) as conn:
        counts = [
            conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("runs", "config_failures", "sweeps")
        ]
    assert counts == [6, 1, 1]


def test_drop_beyond_threshold_and_noise_band_is_a_regression(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    history = [100.0, 101.0, 99.0, 100.5]
    sweeps = [nightly(tmp_path, f"n{i}", i, {"baseline": 90.0, "s2": t}) for i, t in enumerate(history)]
    ingest_all(db, *sweeps, nightly(tmp_path, "n9", 9, {"baseline": 90.2, "s2": 90.0}))
    code, md, junit = regress(db, tmp_path)
    assert code == 1, md
    assert "**1 regression(s)**" in md and "### Regressions (1)" in md and "| s2 |" in md
    assert "-10.2%" in md and "(n=4)" in md, md
    failure = case(junit, "s2").find("failure")
    assert (
        failure is not None
        and failure.get("type") == "regression"
        and "90.0 tok/s vs 100.2" in failure.get("message", "")
    )
    assert case(junit, "baseline").find("failure") is None
    assert junit.get("failures") == "1" and junit.get("tests") == "2"


def test_drop_inside_the_noise_band_or_under_the_threshold_passes(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    swings = [100.0, 80.0, 120.0, 90.0, 110.0]  # median 100, MAD 10: band 3 x 10 = 30 tok/s
    sweeps = [nightly(tmp_path, f"n{i}", i, {"baseline": 90.0, "s2": t}) for i, t in enumerate(swings)]
    ingest_all(db, *sweeps, nightly(tmp_path, "n9", 9, {"baseline": 87.5, "s2": 92.0}))
    code, md, junit = regress(db, tmp_path)
    assert code == 0 and "**0 regression(s)**" in md and "2 unchanged" in md, md
    assert "noise band ±30.00" in (case(junit, "s2").findtext("system-out") or "")
    # A tighter band (k = 0.5 -> 5 tok/s) makes the same -8% drop a regression.
    assert regress(db, tmp_path, "--mad-k", "0.5")[0] == 1
    # -2.8% on the baseline is under the 5% threshold whatever the band; at 1% it is not.
    assert regress(db, tmp_path, "--threshold", "0.01")[1].count("| baseline |") == 1


def test_improvements_new_missing_and_engine_version_changes_are_listed(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    old = [nightly(tmp_path, f"n{i}", i, {"baseline": 90.0, "s2": 100.0, "s3": 100.0}) for i in (1, 2)]
    old.append(nightly(tmp_path, "n2", 2, {"s2": 100.0}, host="gpu-b", version="0.5.0"))
    latest = nightly(tmp_path, "n3", 3, {"baseline": 90.0, "s2": 115.0, "s4": 105.0})
    nightly(tmp_path, "n3", 3, {"s2": 70.0}, host="gpu-b", version="0.5.1")
    ingest_all(db, *old, latest)
    code, md, junit = regress(db, tmp_path)
    assert code == 0, md
    for heading in ("### Improvements (1)", "### New configs (1)", "### Missing from the latest sweep (1)",
                    "### Engine version changed (not compared across versions) (1)"):  # fmt: skip
        assert heading in md, md
    assert "0.5.0 → 0.5.1" in md and "Regressions" not in md
    assert case(junit, "s3").find("skipped") is not None
    assert "0.5.0 -> 0.5.1" in (case(junit, "s2", "gpu-b").find("skipped").get("message") or "")
    assert case(junit, "s2").findtext("system-out", "").startswith("improvement")


def test_a_config_that_worked_and_now_fails_is_a_regression(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    sweeps = [nightly(tmp_path, f"n{i}", i, {"baseline": 90.0, "s2": 100.0}) for i in (1, 2)]
    ingest_all(db, *sweeps, nightly(tmp_path, "n3", 3, {"baseline": 90.0}, failed=("s2",)))
    code, md, junit = regress(db, tmp_path)
    assert code == 1 and "### Failed in the latest sweep (measured before) (1)" in md
    assert "crash_during_load" in md
    failure = case(junit, "s2").find("failure")
    assert failure is not None and failure.get("type") == "failed"


def test_latest_selects_the_sweep_and_usage_errors_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    a = nightly(tmp_path, "n1", 1, {"baseline": 90.0, "s2": 100.0})
    b = nightly(tmp_path, "n2", 2, {"baseline": 90.0, "s2": 80.0})
    c = nightly(tmp_path, "n3", 3, {"baseline": 90.0, "s2": 100.0})
    ingest_all(db, c, a, b)  # ingest order does not matter: sweeps are ordered by start time
    assert regress(db, tmp_path)[0] == 0, "n3 against n1, n2 (median 90): +11%, not a regression"
    code, md, _ = regress(db, tmp_path, "--latest", "n2")
    assert code == 1 and "sweep n2" in md and "(n=1)" in md
    assert main(["regress", "--history", str(db), "--latest", "nope"]) == 2
    assert main(["regress", "--history", str(tmp_path / "missing.sqlite")]) == 2


def test_cli_exit_codes_through_python_dash_m(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    sweeps = [nightly(tmp_path, f"n{i}", i, {"baseline": 90.0, "s2": 100.0}) for i in (1, 2)]
    bad = nightly(tmp_path, "n3", 3, {"baseline": 90.0, "s2": 50.0})

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        """`python -m analysis ARGS` from the repository root."""
        return subprocess.run([sys.executable, "-m", "analysis", *args], cwd=REPO, capture_output=True,
                              text=True, timeout=120, check=False)  # fmt: skip

    assert cli("ingest", *map(str, sweeps), "--history", str(db)).returncode == 0
    assert cli("regress", "--history", str(db)).returncode == 0
    assert cli("ingest", str(bad), "--history", str(db)).returncode == 0
    proc = cli("regress", "--history", str(db), "--junit", str(tmp_path / "j.xml"))
    assert proc.returncode == 1 and "### Regressions (1)" in proc.stdout, proc
    assert ET.parse(tmp_path / "j.xml").getroot().get("failures") == "1"
