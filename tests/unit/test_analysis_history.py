"""History store (`ingest`, its migration) and verdicts of `regress`: exit codes, Markdown, JUnit."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from factories import config, crash, fact, relaunched, run, write_sweep

from analysis.cli import main
from analysis.facts.schema import Engine
from analysis.nightly import history

REPO = Path(__file__).resolve().parents[2]


def nightly(root: Path, sweep: str, night: int, tps: dict[str, float], *, version: str = "0.5.0",
            host: str = "gpu-a", failed: tuple[str, ...] = (), relaunch: bool = False) -> Path:  # fmt: skip
    """One sweep folder: each config at the given tok/s over 3 tight repeats; `failed` crashed;
    `relaunch`: the baseline launched again at the end (the sweep then measured its launch spread)."""
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
    return write_sweep(root, relaunched(facts) if relaunch else facts)


def ingest_all(db: Path, *sweeps: Path) -> None:
    """Ingest sweep folders through the CLI entry point; each must succeed."""
    assert main(["ingest", *map(str, sweeps), "--history", str(db)]) == 0


def regress(db: Path, tmp_path: Path, *extra: str) -> tuple[int, str, ET.Element]:
    """Run `regress` in-process: (exit code, Markdown written, JUnit root); JSON in tmp_path/r.json."""
    md, junit, js = tmp_path / "summary.md", tmp_path / "junit.xml", tmp_path / "r.json"
    code = main(["regress", "--history", str(db), "--markdown", str(md), "--junit", str(junit),
                 "--json", str(js), *extra])  # fmt: skip
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
            for t in ("runs", "config_failures", "sweeps", "provenance")
        ]
    assert counts == [6, 1, 1, 3]  # provenance: one per fact, the failed config's too


def test_window_rule_drop_beyond_threshold_and_noise_band_is_a_regression(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    nights = [100.0, 101.0, 99.0, 100.5]
    sweeps = [nightly(tmp_path, f"n{i}", i, {"baseline": 90.0, "s2": t}) for i, t in enumerate(nights)]
    ingest_all(db, *sweeps, nightly(tmp_path, "n9", 9, {"baseline": 90.2, "s2": 90.0}))
    code, md, junit = regress(db, tmp_path, "--rule", "window")
    assert code == 1, md
    assert "**1 regression(s)**" in md and "### Regressions (1)" in md and "| s2 |" in md
    assert "-10.2%" in md and "(n=4)" in md, md
    failure = case(junit, "s2").find("failure")
    assert (
        failure is not None
        and failure.get("type") == "regressed"
        and "90.0 tok/s vs 100.2" in failure.get("message", "")
    )
    assert case(junit, "baseline").find("failure") is None
    assert junit.get("failures") == "1" and junit.get("tests") == "2"


def test_window_rule_drop_inside_the_noise_band_or_under_the_threshold_passes(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    swings = [100.0, 80.0, 120.0, 90.0, 110.0]  # median 100, MAD 10: band 3 x 10 = 30 tok/s
    sweeps = [nightly(tmp_path, f"n{i}", i, {"baseline": 90.0, "s2": t}) for i, t in enumerate(swings)]
    ingest_all(db, *sweeps, nightly(tmp_path, "n9", 9, {"baseline": 87.5, "s2": 92.0}))
    code, md, _ = regress(db, tmp_path, "--rule", "window")
    assert code == 0 and "**0 regression(s)**" in md and "2 unchanged" in md, md
    report = json.loads((tmp_path / "r.json").read_text())
    s2 = next(c for c in report["cells"] if c["config"] == "s2")
    assert s2["band_tps"] == pytest.approx(30.0) and s2["window_change_pct"] == pytest.approx(-8.0), s2
    # A tighter band (k = 0.5 -> 5 tok/s) makes the same -8% drop a regression.
    assert regress(db, tmp_path, "--rule", "window", "--mad-k", "0.5")[0] == 1
    # -2.8% on the baseline is under the 5% threshold whatever the band; at 1% it is not.
    assert regress(db, tmp_path, "--rule", "window", "--threshold", "0.01")[1].count("| baseline |") == 1
    # The change-point rule sees nights swinging 20% around 100: 92 is no change point either.
    regress(db, tmp_path)
    s2 = next(c for c in json.loads((tmp_path / "r.json").read_text())["cells"] if c["config"] == "s2")
    assert (s2["verdict"], s2["rule"]) == ("unchanged", "change_point"), s2


def test_change_point_rule_names_the_first_night_of_the_lower_segment(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    nights = [100.0, 101.0, 99.0, 100.5, 99.5, 90.0, 90.5]  # down 10% from n5 on
    ingest_all(
        db, *(nightly(tmp_path, f"n{i}", i, {"baseline": 90.0, "s2": t}) for i, t in enumerate(nights))
    )
    code, md, junit = regress(db, tmp_path)
    assert code == 1 and "### Regressions (1)" in md, md
    s2 = next(c for c in json.loads((tmp_path / "r.json").read_text())["cells"] if c["config"] == "s2")
    assert (s2["verdict"], s2["rule"], s2["changed_at"], s2["baseline_nights"]) == (
        "regressed", "change_point", "n5", 5
    ), s2  # fmt: skip
    assert -12.0 < s2["change_lo_pct"] < s2["change_pct"] < s2["change_hi_pct"] < -8.0, s2
    failure = case(junit, "s2").find("failure")
    assert failure is not None and "since n5 (change_point" in failure.get("message", "")
    # Two nights later the new level is no longer news (--window 1: one night).
    assert regress(db, tmp_path, "--window", "1")[0] == 0


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
                    "### Engine version changed (fewer than 4 nights to compare across it) (1)"):  # fmt: skip
        assert heading in md, md
    assert "0.5.0 → 0.5.1" in md and "Regressions" not in md
    assert case(junit, "s3").find("skipped") is not None
    assert "0.5.0 -> 0.5.1" in (case(junit, "s2", "gpu-b").find("skipped").get("message") or "")
    assert case(junit, "s2").findtext("system-out", "").startswith("improved: 115.0 tok/s vs 100.0")


def test_a_config_that_worked_and_now_fails_is_a_regression(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    sweeps = [nightly(tmp_path, f"n{i}", i, {"baseline": 90.0, "s2": 100.0}) for i in (1, 2)]
    ingest_all(db, *sweeps, nightly(tmp_path, "n3", 3, {"baseline": 90.0}, failed=("s2",)))
    code, md, junit = regress(db, tmp_path)
    assert code == 1 and "### Failed in the latest sweep (measured before) (1)" in md
    assert "crash_during_load" in md
    failure = case(junit, "s2").find("failure")
    assert failure is not None and failure.get("type") == "failed"
    assert "failed (crash_during_load) since n3" in failure.get("message", "")


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


def test_a_configs_second_launch_is_ingested_beside_its_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The baseline launched again at the end, its runs as the first launch's (repeat for repeat).
    sweep = nightly(tmp_path, "n1", 1, {"baseline": 90.0, "s2": 100.0}, relaunch=True)
    db = tmp_path / "h.sqlite"
    ingest_all(db, sweep)
    said = capsys.readouterr().out
    with sqlite3.connect(db) as conn:
        launches = conn.execute(
            "SELECT launch, count(*) FROM runs WHERE config_id = 'baseline' GROUP BY launch ORDER BY launch"
        ).fetchall()
    first = launches[0][1]
    assert launches == [(1, first), (2, first)], launches
    assert "n1: 0 run(s) added" not in said and ", 0 already" in said, said


# The store as the previous specsweep wrote it (before step times, adaptive and provenance).
V1_SCHEMA = """
CREATE TABLE sweeps (sweep_id TEXT PRIMARY KEY, started_at REAL, ingested_at REAL NOT NULL);
CREATE TABLE runs (
    sweep_id TEXT NOT NULL, host TEXT NOT NULL, engine TEXT NOT NULL, engine_version TEXT,
    model TEXT NOT NULL, config_id TEXT NOT NULL, speculative INTEGER, algorithm TEXT,
    steps INTEGER, topk INTEGER, draft_tokens INTEGER, env_profile TEXT, source TEXT,
    concurrency INTEGER NOT NULL, repeat INTEGER NOT NULL, run_ok INTEGER NOT NULL, cause TEXT,
    decode_tps REAL, accept_length REAL, ttft_s REAL, itl_s REAL,
    PRIMARY KEY (sweep_id, host, config_id, concurrency, repeat));
CREATE TABLE config_failures (
    sweep_id TEXT NOT NULL, host TEXT NOT NULL, engine TEXT, engine_version TEXT, model TEXT,
    config_id TEXT NOT NULL, cause TEXT, message TEXT,
    PRIMARY KEY (sweep_id, host, config_id));
"""


def test_a_store_of_the_previous_schema_is_migrated_and_keeps_its_nights(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    with sqlite3.connect(db) as conn:
        conn.executescript(V1_SCHEMA)
        for night, tps in enumerate([100.0, 100.5, 99.5, 100.2]):
            conn.execute("INSERT INTO sweeps VALUES (?, ?, ?)", (f"old{night}", 1e9 + night * 86400, 0.0))
            conn.execute(
                "INSERT INTO runs VALUES (?, 'gpu-a', 'sglang', '0.5.0', 'Kimi-K2.5', 's2', 1, 'EAGLE3',"
                " 2, 1, 3, 'default', 'specsweep', 1, 0, 1, NULL, ?, 2.5, 0.5, 0.01)",
                (f"old{night}", tps),
            )
    ingest_all(db, nightly(tmp_path, "new", 9, {"s2": 80.0}))
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == history.SCHEMA_VERSION
        columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
        stored = conn.execute(
            "SELECT sweep_id, adaptive, step_time_ms FROM runs ORDER BY sweep_id"
        ).fetchall()
    assert set(history.RUN_COLUMNS) <= columns
    with sqlite3.connect(db) as conn:  # rebuilt with the workload and the launch in its key
        assert history._key(conn, "runs")[-3:] == ["concurrency", "launch", "repeat"]
    assert stored[:2] == [("new", 0, None), ("new", 0, None)] and stored[-1] == ("old3", None, None), stored
    # The old nights kept decode tok/s only: the throughput judged now (the default objective) is
    # never compared with it, so s2 starts its series tonight rather than "regressing" 100 -> 80.
    code, _, _ = regress(db, tmp_path)
    s2 = json.loads((tmp_path / "r.json").read_text())["cells"][0]
    assert (code, s2["verdict"], s2["baseline_tps"]) == (0, "new", None), s2
    with sqlite3.connect(db) as conn:
        kept = conn.execute("SELECT decode_tps, total_tps FROM runs WHERE sweep_id = 'old3'").fetchall()
    assert kept == [(100.2, None)], kept


def test_a_store_of_the_schema_before_recommendations_is_migrated_and_compared_from_then_on(
    tmp_path: Path,
) -> None:
    db = tmp_path / "v2.sqlite"
    ingest_all(db, nightly(tmp_path, "n1", 1, {"baseline": 90.0, "s2": 100.0}))
    # Schema 2 is this one without the recommendations table: n1 as that specsweep stored it.
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE recommendations")
        conn.execute("PRAGMA user_version = 2")
    ingest_all(db, nightly(tmp_path, "n2", 2, {"baseline": 90.0, "s2": 100.5}, relaunch=True))
    with sqlite3.connect(db) as conn:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        stored = conn.execute("SELECT sweep_id, concurrency, config FROM recommendations").fetchall()
    assert (version, stored) == (history.SCHEMA_VERSION, [("n2", 1, "s2")]), (version, stored)
    code, md, _ = regress(db, tmp_path)
    changes = json.loads((tmp_path / "r.json").read_text())["recommendations"]
    assert code == 0 and [(c["change"], c["previous_sweep"], c["concurrency"]) for c in changes] == [
        ("not_recorded", "n1", None)
    ], changes
    assert "- gpu-a sglang Kimi-K2.5: not compared, n1 was ingested before the history kept" in md, md
    # The next night compares with n2: s2 now slower than the baseline, which becomes the answer.
    ingest_all(db, nightly(tmp_path, "n3", 3, {"baseline": 90.0, "s2": 80.0}, relaunch=True))
    code, md, junit = regress(db, tmp_path)
    changes = json.loads((tmp_path / "r.json").read_text())["recommendations"]
    assert [(c["change"], c["concurrency"], c["previous"], c["latest"]) for c in changes] == [
        ("changed", 1, "s2", "baseline")
    ], changes
    assert "- gpu-a sglang Kimi-K2.5 c1: s2 -> baseline (against n2; fastest" in md, md
    # The exit status and JUnit are the verdicts' alone: s2's drop fails, the change adds nothing.
    assert (code, junit.get("failures"), junit.get("tests")) == (1, "1", "2")


def test_a_store_of_a_newer_schema_or_another_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    newer, other = tmp_path / "newer.sqlite", tmp_path / "notes.txt"
    with sqlite3.connect(newer) as conn:
        conn.execute(f"PRAGMA user_version = {history.SCHEMA_VERSION + 1}")
    other.write_text("not a database, just text that is long enough to have a header page\n" * 20)
    sweep = nightly(tmp_path, "n1", 1, {"s2": 100.0})
    for db in (newer, other):
        assert main(["ingest", str(sweep), "--history", str(db)]) == 2
        assert main(["regress", "--history", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"history schema {history.SCHEMA_VERSION + 1} was written by a newer specsweep" in err, err
    assert f"{other}: not a history store" in err, err
    with sqlite3.connect(newer) as conn:  # refused, not rewritten
        assert conn.execute("PRAGMA user_version").fetchone()[0] == history.SCHEMA_VERSION + 1


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--alpha", "0", "regress: alpha must be a p-value above 0 and below 1 (got 0.0)"),
        ("--nights", "3", "regress: nights must be at least 4 (got 3)"),
        ("--accept-drop", "1", "regress: accept_drop must be a share from 0 to below 1 (got 1.0)"),
    ],
)
def test_regress_refuses_a_setting_no_rule_can_use_before_reading_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, message: str
) -> None:
    missing = tmp_path / "none.sqlite"  # never opened: the settings are checked first
    assert main(["regress", "--history", str(missing), option, value]) == 2
    assert capsys.readouterr().err.strip() == message


def workload_night(root: Path, sweep: str, night: int, chat_tps: float) -> Path:
    """s2 measured on chat (at chat_tps) and code (steady) on one launch, 3 repeats each."""
    runs = [
        run([tps * f], repeat=i, workload=w)
        for w, tps in (("chat", chat_tps), ("code", 150.0))
        for i, f in enumerate((1.0, 1.002, 0.998))
    ]
    return write_sweep(root / sweep, [fact(config(2), runs, sweep_id=sweep, started_at=1e9 + night * 86400)])


def test_each_workload_is_a_cell_of_its_own_in_the_history_and_the_verdicts(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    nights = [workload_night(tmp_path, f"n{i}", i, tps) for i, tps in enumerate([100.0, 100.3, 99.8, 80.0])]
    ingest_all(db, *nights)
    ingest_all(db, nights[-1])  # again: nothing added, the workload is part of the key
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT workload, count(*) FROM runs GROUP BY workload").fetchall()
        levels = conn.execute("SELECT DISTINCT workload FROM recommendations ORDER BY workload").fetchall()
    assert stored == [("chat", 12), ("code", 12)] and levels == [("chat",), ("code",)]
    code, md, junit = regress(db, tmp_path)
    cells = {c["workload"]: c for c in json.loads((tmp_path / "r.json").read_text())["cells"]}
    assert code == 1 and cells["chat"]["verdict"] == "regressed" and cells["code"]["verdict"] != "regressed"
    assert "| s2 (chat) |" in md and "s2 (code)" not in md, md  # unchanged cells are not listed
    assert case(junit, "s2 (chat)").find("failure") is not None
