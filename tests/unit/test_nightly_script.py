"""scripts/nightly.py, the ansible-runner entry point, with ansible_runner.run replaced by a stand-in."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from plugin_loader import REPO, load_plugin

from analysis.sweep import request

nightly = load_plugin("scripts/nightly.py")


def test_night_id_is_utc_and_sorts_by_time() -> None:
    paris = datetime(2026, 3, 1, 2, 30, 5, tzinfo=timezone(timedelta(hours=1)))
    assert nightly.night_id(paris) == "nightly-20260301T013005Z"
    later = nightly.night_id(datetime(2026, 3, 10, 0, 0, tzinfo=UTC))
    assert sorted([later, nightly.night_id(paris)]) == [nightly.night_id(paris), later]


def test_runner_runs_the_playbook_from_the_repo_with_a_folder_per_night(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # relative paths are the caller's, not the repo's
    args = nightly.parse_args(["-i", "inv.yml", "--dir", "nights", "--history", "h.sqlite", "--keep", "3"])
    kw = nightly.runner_kwargs(args, "nightly-20260301T013005Z")
    assert {k: kw[k] for k in ("private_data_dir", "artifact_dir", "ident", "rotate_artifacts")} == {
        "private_data_dir": str(tmp_path / "nights"),
        "artifact_dir": str(tmp_path / "nights" / "artifacts"),
        "ident": "nightly-20260301T013005Z",
        "rotate_artifacts": 3,
    }
    assert (kw["project_dir"], kw["playbook"]) == (str(REPO), str(REPO / "playbooks" / "nightly.yml"))
    assert kw["inventory"] == [str(tmp_path / "inv.yml")]
    assert kw["extravars"] == {
        "sweep_id": "nightly-20260301T013005Z",
        "nightly_reports_dir": str(tmp_path / "nights" / "reports"),
        "nightly_history": str(tmp_path / "h.sqlite"),
    }
    assert kw["suppress_env_files"] is True
    assert kw["envvars"]["PATH"].split(":")[0] == str(Path(sys.executable).parent)
    assert kw["envvars"]["ANSIBLE_HOST_KEY_CHECKING"] == "True"


def test_defaults_leave_inventory_and_history_to_ansible_cfg_and_the_playbook() -> None:
    kw = nightly.runner_kwargs(nightly.parse_args([]), "nightly-x")
    assert kw["inventory"] is None and kw["cmdline"] is None
    assert "nightly_history" not in kw["extravars"]
    assert kw["private_data_dir"] == str(REPO / "results" / "nightly")
    assert kw["rotate_artifacts"] == 14


def test_extra_vars_reach_ansible_playbook_verbatim() -> None:
    args = nightly.parse_args(
        ["-e", "target=gpu", "-e", "note='a b' c=$HOME", "--extra-vars", "@my vars.yml"]
    )
    cmdline = nightly.runner_kwargs(args, "nightly-x")["cmdline"]
    assert shlex.split(cmdline) == ["-e", "target=gpu", "-e", "note='a b' c=$HOME", "-e", "@my vars.yml"]


def test_keep_below_one_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        nightly.parse_args(["--keep", "0"])
    assert exc.value.code == 2
    assert "--keep must be at least 1" in capsys.readouterr().err


def test_rotate_keeps_the_newest_nights_only(tmp_path: Path) -> None:
    names = ["nightly-20260103T020000Z", "nightly-20260101T020000Z", "nightly-20260102T020000Z"]
    for name in names:
        (tmp_path / name).mkdir()
    (tmp_path / "notes").mkdir()  # not a night: left alone
    (tmp_path / "nightly-20250101T000000Z.md").write_text("a file, not a night")
    removed = nightly.rotate(tmp_path, 2)
    assert [p.name for p in removed] == ["nightly-20260101T020000Z"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "nightly-20250101T000000Z.md", "nightly-20260102T020000Z", "nightly-20260103T020000Z", "notes",
    ]  # fmt: skip
    assert nightly.rotate(tmp_path, 2) == []


def test_main_exits_with_the_runner_status_and_rotates_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[dict[str, Any]] = []

    def fake_run(**kwargs: Any) -> SimpleNamespace:
        calls.append(kwargs)
        (tmp_path / "reports" / kwargs["ident"]).mkdir(parents=True)  # what the playbook writes
        artifacts = Path(kwargs["artifact_dir"]) / kwargs["ident"]
        return SimpleNamespace(rc=2, status="failed", config=SimpleNamespace(artifact_dir=str(artifacts)))

    monkeypatch.setattr(nightly.ansible_runner, "run", fake_run)
    for old in ("nightly-20000101T000000Z", "nightly-20000102T000000Z"):
        (tmp_path / "reports" / old).mkdir(parents=True)

    assert nightly.main(["--dir", str(tmp_path), "--keep", "2"]) == 2
    (night,) = [c["ident"] for c in calls]
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["nightly-20000102T000000Z", night]
    out = capsys.readouterr().out
    assert f"night {night}: failed (exit 2)" in out
    assert str(tmp_path / "artifacts" / night) in out
    assert str(tmp_path / "reports" / night) in out


def test_the_playbook_reads_every_variable_the_script_sets() -> None:
    playbook = (REPO / "playbooks" / "nightly.yml").read_text()
    args = nightly.parse_args(["--history", "h.sqlite"])
    for name in nightly.runner_kwargs(args, "nightly-x")["extravars"]:
        # A sweep setting (the plan reads it from -e) or one of the nightly's own variables.
        assert name in request.BY_NAME or f"{name} | default(" in playbook, name
        assert name in request.BY_NAME or name in request.SUITE_VARIABLES, name  # not refused as a typo


def test_a_stop_is_passed_on_to_the_playbook_as_sigterm_once_and_runner_never_cancels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = tmp_path / "signals"
    # Stands in for runner's ansible-playbook: counts the SIGTERMs it gets, and exits after the first.
    code = (
        "import signal, sys, time\n"
        "n = []\n"
        "def got(*a):\n"
        "    n.append(1); open(sys.argv[1], 'w').write(str(len(n)))\n"
        "signal.signal(signal.SIGTERM, got)\n"
        "print('ready', flush=True)\n"
        "while len(n) < 1: time.sleep(0.05)\n"
    )
    calls: list[dict[str, Any]] = []

    def fake_run(**kwargs: Any) -> SimpleNamespace:
        child = subprocess.Popen([sys.executable, "-c", code, str(seen)], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        os.kill(os.getpid(), signal.SIGTERM)  # systemctl stop
        os.kill(os.getpid(), signal.SIGINT)  # and a Ctrl-C: passed on once only
        child.wait(timeout=30)
        calls.append(kwargs)
        return SimpleNamespace(rc=99, status="failed", config=SimpleNamespace(artifact_dir=str(tmp_path)))

    monkeypatch.setattr(nightly.ansible_runner, "run", fake_run)
    before = signal.getsignal(signal.SIGINT)
    assert nightly.main(["--dir", str(tmp_path)]) == 99
    assert seen.read_text() == "1"
    assert calls[0]["cancel_callback"]() is False
    assert signal.getsignal(signal.SIGINT) is before  # restored
