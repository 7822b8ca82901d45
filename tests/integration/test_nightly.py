"""The nightly for real: its systemd timer on a systemd-nspawn host, and two nights run through
scripts/nightly.py (ansible-runner) over SSH hosts serving llama.cpp, the second one regressing."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from nspawnhost import NspawnHost
from sweeps import REPO, sweep_env, wait_for

from analysis.deployments import FIELDS, record
from analysis.nightly import history

UNIT_DIR = "/etc/systemd/system"
# A stand-in repository in the container: the real ExecStart shape (venv Python + nightly.py)
# running a script that records how systemd started it.
FAKE_REPO = "/opt/repo"
MARKER = "/var/tmp/nightly-ran.json"
FAKE_NIGHTLY = f"""import json, os, sys
with open({MARKER!r} + ".tmp", "w") as f:
    json.dump({{"argv": sys.argv[1:], "cwd": os.getcwd(), "env": os.environ.get("PYTHONUNBUFFERED")}}, f)
os.replace({MARKER!r} + ".tmp", {MARKER!r})  # whole or absent for the poller
"""
# Arguments that only survive systemd's parsing when quoted right.
HOSTILE_ARGS = ["--keep", "3", "-e", "note=two  words $HOME 100% \"q\" 'x' \\n"]


def recap(output: str, host: str) -> dict[str, int]:
    """The PLAY RECAP counters of `host`."""
    line = re.search(rf"^{host}\s+:(.*)$", output, re.M)
    assert line, output[-3000:]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line.group(1))}


# --------------------------------------------------------------------------------------
# The schedule: playbooks/schedule.yml on a real systemd host
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def controller(make_systemd_host) -> NspawnHost:
    """A systemd host standing in for the controller, with the stand-in repository."""
    host: NspawnHost = make_systemd_host("nightly1")
    for argv in (
        ["mkdir", "-p", f"{FAKE_REPO}/.venv/bin", f"{FAKE_REPO}/scripts"],
        ["ln", "-sf", "/usr/bin/python3", f"{FAKE_REPO}/.venv/bin/python"],
        ["python3", "-c", f"open('{FAKE_REPO}/scripts/nightly.py', 'w').write({FAKE_NIGHTLY!r})"],
    ):
        res = host.run_in_host(argv)
        assert res.returncode == 0, (argv, res.stderr)
    return host


@pytest.fixture(scope="module")
def schedule(controller: NspawnHost, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., str]:
    """schedule(vars, *args): run playbooks/schedule.yml on the controller; returns its output."""
    tmp = tmp_path_factory.mktemp("schedule")
    inventory = controller.write_inventory(tmp / "hosts.yml", group="controllers")

    def run(extra: dict[str, Any], *args: str, rc: int = 0) -> str:
        vars_file = tmp / "vars.json"
        vars_file.write_text(json.dumps({"controller": controller.name, **extra}))
        argv = [str(Path(sys.executable).parent / "ansible-playbook"), "playbooks/schedule.yml"]
        argv += ["-i", str(inventory), "-e", f"@{vars_file}", *args]
        proc = subprocess.run(argv, cwd=REPO, env=sweep_env(), capture_output=True, text=True, timeout=300)
        output = proc.stdout + proc.stderr
        assert proc.returncode == rc, output[-4000:]
        return output

    return run


def test_schedule_installs_a_timer_that_starts_the_nightly_and_removes_it(
    controller: NspawnHost, schedule: Callable[..., str]
) -> None:
    def sh(*argv: str) -> str:
        return controller.run_in_host(list(argv)).stdout.strip()

    def prop(unit: str, name: str) -> str:
        return sh("systemctl", "show", "-p", name, "--value", f"specsweep-nightly.{unit}")

    units = [f"{UNIT_DIR}/specsweep-nightly.{kind}" for kind in ("service", "timer")]
    settings = {"nightly_schedule_repo_dir": FAKE_REPO, "nightly_schedule_args": HOSTILE_ARGS}

    # --check on a controller without the units: reports the changes, makes none.
    out = schedule(settings, "--check")
    assert recap(out, controller.name)["changed"] > 0, out[-3000:]
    assert sh("ls", UNIT_DIR).split().count("specsweep-nightly.timer") == 0

    out = schedule(settings)
    assert recap(out, controller.name)["changed"] > 0, out[-3000:]
    assert sh("systemctl", "is-enabled", "specsweep-nightly.timer") == "enabled"
    assert sh("systemctl", "is-active", "specsweep-nightly.timer") == "active"
    next_elapse = prop("timer", "NextElapseUSecRealtime")
    assert re.search(r"\d{4}-\d\d-\d\d 02:00:00", next_elapse), next_elapse
    service = sh("cat", units[0])
    assert f"WorkingDirectory={FAKE_REPO}\n" in service + "\n", service
    expected = (
        f'ExecStart="{FAKE_REPO}/.venv/bin/python" "{FAKE_REPO}/scripts/nightly.py" "--keep" "3" "-e" '
        '"note=two  words $$HOME 100%% \\"q\\" \'x\' \\\\n"'
    )
    assert expected in service.splitlines(), service
    assert "OnCalendar=*-*-* 02:00:00" in sh("cat", units[1])

    # Idempotent: the same settings again change nothing.
    out = schedule(settings)
    assert recap(out, controller.name)["changed"] == 0, out[-3000:]

    # --check with another schedule: reported, not applied.
    every_5s = {**settings, "nightly_schedule_on_calendar": "*:*:0/5", "nightly_schedule_accuracy_s": 1}
    out = schedule(every_5s, "--check")
    assert recap(out, controller.name)["changed"] > 0, out[-3000:]
    assert "OnCalendar=*-*-* 02:00:00" in sh("cat", units[1])

    # A schedule due within seconds: the timer really starts the service, which runs the command.
    sh("rm", "-f", MARKER)
    out = schedule(every_5s)
    assert recap(out, controller.name)["changed"] > 0, out[-3000:]
    ran = wait_for(lambda: sh("cat", MARKER), "the timer to start the nightly service", timeout=30)
    assert json.loads(ran) == {"argv": HOSTILE_ARGS, "cwd": FAKE_REPO, "env": "1"}, ran
    # The oneshot is done (inactive) once its command has exited; then its result is final.
    wait_for(lambda: prop("service", "ActiveState") == "inactive", "the service to finish", timeout=10)
    assert prop("service", "Result") == "success"
    assert prop("timer", "LastTriggerUSec") not in ("", "n/a")

    # state=absent removes both units, then has nothing left to do.
    out = schedule({"nightly_schedule_state": "absent"})
    assert recap(out, controller.name)["changed"] > 0, out[-3000:]
    assert sh("ls", UNIT_DIR).split().count("specsweep-nightly.timer") == 0
    assert sh("ls", UNIT_DIR).split().count("specsweep-nightly.service") == 0
    assert prop("timer", "LoadState") == "not-found"
    out = schedule({"nightly_schedule_state": "absent"})
    assert recap(out, controller.name)["changed"] == 0, out[-3000:]


def test_schedule_refuses_a_calendar_systemd_cannot_parse(schedule: Callable[..., str]) -> None:
    out = schedule({"nightly_schedule_on_calendar": "every night"}, rc=2)
    refusal = "nightly_schedule_on_calendar: 'every night' is not a systemd calendar expression"
    assert refusal in out, out[-3000:]
    assert "Render the nightly" not in out, out[-3000:]  # refused before any unit is written


# --------------------------------------------------------------------------------------
# Two nights through scripts/nightly.py over the SSH hosts
# --------------------------------------------------------------------------------------

TINY_GRID = {"steps": [1], "repeats": 1, "max_tokens": 8, "warmup": 0}
KEEP = 2


def run_night(tmp: Path, inventory: Path) -> tuple[subprocess.CompletedProcess[str], str]:
    """One night through the ansible-runner entry point, from a cwd outside the repo."""
    argv = [sys.executable, str(REPO / "scripts" / "nightly.py"), "-i", str(inventory)]
    argv += ["--dir", "nightly", "--history", "history.sqlite", "--keep", str(KEEP)]
    argv += ["-e", f"results_dir={tmp / 'results'}"]
    env = {**sweep_env(), "SPECSWEEP_ANALYSIS_CACHE": str(tmp / "analysis-cache")}
    proc = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True, timeout=900)
    night = re.search(r"^night (nightly-\d{8}T\d{6}Z): ", proc.stdout, re.M)
    assert night, (proc.stdout + proc.stderr)[-4000:]
    return proc, night.group(1)


def events(artifacts: Path) -> list[dict[str, Any]]:
    """ansible-runner's job events of one night, in order."""
    found = [json.loads(p.read_text()) for p in (artifacts / "job_events").glob("*.json")]
    return sorted(found, key=lambda e: e["counter"])


def history_counts(db: Path) -> dict[str, int]:
    """Stored runs per sweep."""
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT sweep_id, count(*) FROM runs GROUP BY sweep_id").fetchall())


def write_faster_past(results: Path, night: str, days_before: int) -> Path:
    """A copy of a night's facts as an earlier sweep that was 3x as fast."""
    name = f"past-{days_before}d"
    for path in (results / night).glob("*/*.json"):
        fact = json.loads(path.read_text())
        fact["sweep_id"] = name
        for key in ("started_at", "ready_at", "finished_at"):
            if fact["timings"].get(key) is not None:
                fact["timings"][key] -= days_before * 86400
        for run in fact["runs"]:
            # Total tok/s (the nightly's objective) is tokens over the window: a third of the time.
            run["duration_s"] /= 3
            for request in run["requests"]:
                request["decode_tps"] *= 3
        out = results / name / path.parent.name / path.name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(fact))
    return results / name


def test_two_nights_first_clean_then_a_regression_fails_with_a_summary(
    sweep_inventory: Path, tmp_path: Path
) -> None:
    inventory = tmp_path / "nightly-hosts.json"
    sweep = json.loads(sweep_inventory.read_text())
    inventory.write_text(json.dumps({"all": {"vars": {"specsweep_nightly": TINY_GRID}, "children": sweep}}))
    folder, db = tmp_path / "nightly", tmp_path / "history.sqlite"
    # Leftovers of older nights, oldest first: rotation keeps the newest KEEP.
    for i, old in enumerate(("nightly-20000101T000000Z", "nightly-20000102T000000Z")):
        for kind in ("artifacts", "reports"):
            (folder / kind / old).mkdir(parents=True)
            os.utime(folder / kind / old, (946684800 + i * 86400,) * 2)

    first, night1 = run_night(tmp_path, inventory)
    assert first.returncode == 0, (first.stdout + first.stderr)[-5000:]
    # ansible.cfg's callbacks under runner too: the sweep's own summary line and the interrupt handler.
    assert "unable to load" not in first.stdout + first.stderr, first.stdout[-3000:]
    assert re.search(rf"^sweep {night1}: 2 config\(s\)", first.stdout, re.M), first.stdout[-3000:]
    artifacts1 = folder / "artifacts" / night1
    assert (artifacts1 / "rc").read_text() == "0"
    assert (artifacts1 / "status").read_text() == "successful"
    tasks1 = [e["event_data"].get("task") for e in events(artifacts1) if e["event"] == "runner_on_ok"]
    assert "Nightly | Compare the night with the previous ones" in tasks1, tasks1
    assert history_counts(db) == {night1: 4}  # 2 hosts x (baseline, s1) x 1 repeat
    reports1 = folder / "reports" / night1
    assert {"report.md", "report.html", "regress.md", "regress.xml"} <= {p.name for p in reports1.iterdir()}
    assert "**0 regression(s)**" in (reports1 / "regress.md").read_text()
    assert sorted(p.name for p in (folder / "reports").iterdir()) == ["nightly-20000102T000000Z", night1]
    assert sorted(p.name for p in (folder / "artifacts").iterdir()) == ["nightly-20000102T000000Z", night1]

    # The history says the past was 3x as fast: two earlier sweeps, ingested as any sweep is.
    past = [write_faster_past(tmp_path / "results", night1, days) for days in (2, 1)]
    ingest = subprocess.run(
        [sys.executable, "-m", "analysis", "ingest", *map(str, past), "--history", str(db)],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert ingest.returncode == 0, ingest.stderr
    assert history_counts(db) == {night1: 4, "past-2d": 4, "past-1d": 4}
    # deploy.yml put s2 (not in the grid) into production on sshost1: the night measures it there.
    with closing(history.connect(db)) as conn:
        record(conn, {**dict.fromkeys(FIELDS), "host": "sshost1", "deployed_at": 1.0, "sweep_id": "past-1d",
                      "config": "s2", "concurrency": 1, "argv_sha256": "ab"})  # fmt: skip

    second, night2 = run_night(tmp_path, inventory)
    output = second.stdout + second.stderr
    assert second.returncode != 0, output[-5000:]
    assert history_counts(db)[night2] == 5  # measured and stored before failing, s2 on sshost1 too
    with sqlite3.connect(db) as conn:
        hosts = conn.execute("SELECT host FROM runs WHERE sweep_id = ? AND config_id = 's2'", (night2,))
        assert hosts.fetchall() == [("sshost1",)]
    reports2 = folder / "reports" / night2
    summary = (reports2 / "regress.md").read_text()
    assert "**4 regression(s)**" in summary and "### Regressions (4)" in summary, summary
    assert re.search(r"^- sshost1 c1: s2 of past-1d deployed; tonight \S", summary, re.M), summary
    cases = ET.parse(reports2 / "regress.xml").getroot().iter("testcase")
    failing = [c.get("name") for c in cases if c.find("failure") is not None]
    assert len(failing) == 4, failing
    artifacts2 = folder / "artifacts" / night2
    assert (artifacts2 / "status").read_text() == "failed"
    failed = [e["event_data"] for e in events(artifacts2) if e["event"] == "runner_on_failed"]
    assert [f["task"] for f in failed] == ["Nightly | Fail on a regression or a failed config"], failed
    assert f"night {night2}: regression(s)" in failed[0]["res"]["msg"], failed[0]["res"]["msg"]
    assert "### Regressions (4)" in failed[0]["res"]["msg"]
    # Rotation: the two newest nights only.
    for kind in ("artifacts", "reports"):
        assert sorted(p.name for p in (folder / kind).iterdir()) == [night1, night2], kind


def test_a_night_with_a_host_down_stores_what_was_measured_then_fails_naming_the_host(
    sweep_inventory: Path, tmp_path: Path
) -> None:
    sweep = json.loads(sweep_inventory.read_text())
    hosts = sweep["sweep"]["hosts"]
    # A host whose sshd refuses connections: unreachable from the start.
    hosts["ghost"] = {**next(iter(hosts.values())), "ansible_host": "127.0.0.1", "ansible_port": 1}
    inventory = tmp_path / "nightly-hosts.json"
    inventory.write_text(json.dumps({"all": {"vars": {"specsweep_nightly": TINY_GRID}, "children": sweep}}))

    night, name = run_night(tmp_path, inventory)
    output = night.stdout + night.stderr
    assert night.returncode != 0, output[-5000:]
    # The two reachable hosts' runs are in the history before the night fails.
    assert history_counts(tmp_path / "history.sqlite") == {name: 4}
    artifacts = tmp_path / "nightly" / "artifacts" / name
    failed = [e["event_data"] for e in events(artifacts) if e["event"] == "runner_on_failed"]
    assert [f["task"] for f in failed] == ["Nightly | Fail on a regression or a failed config"], failed
    message = failed[0]["res"]["msg"]
    # Named in the host's own (seeded random) launch order: both configs, whichever came first.
    unmeasured = re.search(r"ghost: not reached; not measured: (\S+), (\S+?)(?:\\n|\n|$)", message)
    assert unmeasured and sorted(unmeasured.groups()) == ["baseline", "s1"], message
    assert "**0 regression(s)**" in (tmp_path / "nightly" / "reports" / name / "regress.md").read_text()


def test_a_regression_setting_no_rule_can_use_is_refused_before_any_host_is_touched(
    sweep_inventory: Path, tmp_path: Path
) -> None:
    sweep = json.loads(sweep_inventory.read_text())
    inventory = tmp_path / "nightly-hosts.json"
    settings = {**TINY_GRID, "alpha": 0}
    inventory.write_text(json.dumps({"all": {"vars": {"specsweep_nightly": settings}, "children": sweep}}))
    argv = [
        str(Path(sys.executable).parent / "ansible-playbook"),
        "playbooks/nightly.yml",
        "-i",
        str(inventory),
    ]
    argv += ["-e", f"results_dir={tmp_path / 'results'}"]
    proc = subprocess.run(argv, cwd=REPO, env=sweep_env(), capture_output=True, text=True, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-3000:]
    assert "specsweep_nightly: alpha must be a p-value above 0 and below 1 (got 0)" in output, output[-3000:]
    # No plan was written and no host's preflight ran: nothing under results.
    assert not (tmp_path / "results").exists(), list((tmp_path / "results").rglob("*"))


def night_to_stop(sweep_inventory: Path, tmp: Path) -> list[str]:
    """nightly.py's arguments for a night on sshost1 long enough to be stopped mid-benchmark (every
    path absolute: a unit runs it from the repo)."""
    grid = {**TINY_GRID, "max_tokens": 400, "repeats": 2}
    inventory = tmp / "nightly-hosts.json"
    sweep = json.loads(sweep_inventory.read_text())
    inventory.write_text(json.dumps({"all": {"vars": {"specsweep_nightly": grid}, "children": sweep}}))
    return ["-i", str(inventory), "--dir", str(tmp / "nightly"), "--history", str(tmp / "history.sqlite"),
            "-e", f"results_dir={tmp / 'results'}", "-e", "target=sshost1"]  # fmt: skip


def server_up(run_dir: Path, running: Callable[[], bool]) -> int:
    """The server pid of sshost1's running night, once its server is up (at most 300 s)."""
    pidfile = run_dir / "server-8080.pid"
    wait_for(lambda: pidfile.exists() or not running(), "the night's server", timeout=300)
    assert pidfile.exists(), "the night ended before its server started"
    return json.loads(pidfile.read_text())["server_pid"]


def assert_released(ssh_hosts: Any, run_dir: Path, server: int, took: float, out: str) -> None:
    """sshost1 given back: its lock gone, the night's server gone, within 60 s of the stop."""
    assert "interrupted: stopping the servers of sweep nightly-" in out, out[-3000:]
    assert not (run_dir / "sweep.lock").exists(), out[-3000:]
    state = ssh_hosts.run_in_host("sshost1", ["ps", "-o", "stat=", "-p", str(server)]).stdout.strip()
    assert not state or state.startswith("Z"), out[-3000:]
    # Issue 25's bound: every host given back within 60 s of the stop; on an idle machine, seconds.
    assert took < 60, f"took {took:.0f} s: {out[-3000:]}"


def test_stopping_the_nightly_releases_its_hosts_as_ctrl_c_does(
    sweep_inventory: Path, ssh_hosts: Any, tmp_path: Path
) -> None:
    run_dir = ssh_hosts.opt_dir("sshost1") / "specsweep" / "run"
    argv = [sys.executable, str(REPO / "scripts" / "nightly.py"), *night_to_stop(sweep_inventory, tmp_path)]
    with open(tmp_path / "night.log", "wb") as log:
        night = subprocess.Popen(argv, cwd=tmp_path, env=sweep_env(), stdout=log, stderr=subprocess.STDOUT)
        try:
            server = server_up(run_dir, lambda: night.poll() is None)
            stopped = time.monotonic()
            night.send_signal(signal.SIGTERM)  # what systemctl stop sends it (KillMode=mixed)
            night.wait(timeout=240)
            took = time.monotonic() - stopped
        finally:
            if night.poll() is None:
                night.kill()
    assert_released(ssh_hosts, run_dir, server, took, (tmp_path / "night.log").read_text())


def test_systemctl_stop_of_a_running_night_releases_its_host_within_60_s(
    make_systemd_host: Callable[..., NspawnHost], sweep_inventory: Path, ssh_hosts: Any, tmp_path: Path
) -> None:
    # The real unit (playbooks/schedule.yml) on a systemd host on the SSH hosts' bridge, running this
    # repo's nightly.py; the repo, its venv's interpreter, the hosts' key and this test's folder bound in.
    python = Path(os.path.realpath(sys.executable)).parents[1]
    binds = [(REPO, str(REPO), True), (python, str(python), True),
             (ssh_hosts.workdir, str(ssh_hosts.workdir), False),
             (tmp_path, str(tmp_path), False)]  # fmt: skip
    controller = make_systemd_host("nightly2", netns_hosts=ssh_hosts, binds=binds)
    inventory = controller.write_inventory(tmp_path / "controller.yml", group="controllers")
    args = night_to_stop(sweep_inventory, tmp_path)
    (tmp_path / "schedule.json").write_text(
        json.dumps({"controller": controller.name, "nightly_schedule_args": args})
    )
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "playbooks/schedule.yml",
            "-i", str(inventory), "-e", f"@{tmp_path / 'schedule.json'}"]  # fmt: skip
    scheduled = subprocess.run(argv, cwd=REPO, env=sweep_env(), capture_output=True, text=True, timeout=300)
    assert scheduled.returncode == 0, (scheduled.stdout + scheduled.stderr)[-3000:]

    def sh(*args: str) -> str:
        return controller.run_in_host(list(args)).stdout.strip()

    def running() -> bool:
        return sh("systemctl", "is-active", "specsweep-nightly.service") in ("active", "activating")

    sh("systemctl", "start", "--no-block", "specsweep-nightly.service")
    run_dir = ssh_hosts.opt_dir("sshost1") / "specsweep" / "run"
    server = server_up(run_dir, running)
    stopped = time.monotonic()
    sh("systemctl", "stop", "specsweep-nightly.service")  # returns once the unit's processes are gone
    took = time.monotonic() - stopped
    journal = sh("journalctl", "-u", "specsweep-nightly.service", "--no-pager", "-o", "cat")
    assert_released(ssh_hosts, run_dir, server, took, journal)
