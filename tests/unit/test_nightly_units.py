"""The nightly_schedule role's systemd units, rendered as the role renders them and checked by systemd.

`systemd-analyze verify` is what the role's `validate:` runs on the controller; `systemd-analyze
calendar` is its check of the schedule. Needs the `systemd` package; a missing tool fails the test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml
from plugin_loader import REPO, load_plugin

ROLE = REPO / "roles" / "nightly_schedule"
sd = load_plugin("plugins/filter/specsweep_systemd.py")
# As Ansible renders templates (trim_blocks), with the filters the units use.
JINJA = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, keep_trailing_newline=True)
JINJA.filters.update(
    systemd_quote=sd.systemd_quote,
    dirname=os.path.dirname,
    ternary=lambda value, yes, no: yes if value else no,
)


def role_vars(**overrides: Any) -> dict[str, Any]:
    """The role's defaults with overrides, templated as Ansible does (values refer to each other)."""
    values = {**yaml.safe_load((ROLE / "defaults/main.yml").read_text()), **overrides}
    values |= {"playbook_dir": str(REPO / "playbooks"), "ansible_managed": "Ansible managed"}

    def render(value: Any) -> Any:
        if isinstance(value, str):
            return JINJA.from_string(value).render(values)
        if isinstance(value, list):
            return [render(v) for v in value]
        if isinstance(value, dict):
            return {k: render(v) for k, v in value.items()}
        return value

    for _ in range(3):  # enough passes for the defaults' chains of references
        values = {k: render(v) for k, v in values.items()}
    return values


def render_units(folder: Path, values: dict[str, Any]) -> dict[str, str]:
    """Write <unit>.service and <unit>.timer into folder; their texts by suffix."""
    texts = {}
    for kind in ("service", "timer"):
        text = JINJA.from_string((ROLE / f"templates/nightly.{kind}.j2").read_text()).render(values)
        (folder / f"{values['nightly_schedule_unit']}.{kind}").write_text(text)
        texts[kind] = text
    return texts


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    """systemd-analyze with args; a missing tool fails the test."""
    tool = shutil.which("systemd-analyze")
    if not tool:
        pytest.fail(
            "systemd-analyze is required (the role validates units with it): apt-get install -y systemd"
        )
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=60, check=False)


def verify(folder: Path, unit: str) -> None:
    """Both units pass `systemd-analyze verify`, without a warning that names them."""
    res = analyze("verify", "--man=no", str(folder / f"{unit}.service"), str(folder / f"{unit}.timer"))
    assert res.returncode == 0, res.stderr + res.stdout
    assert unit not in res.stderr + res.stdout, res.stderr + res.stdout


def lines(text: str) -> list[str]:
    """The unit's settings, without comments and blank lines."""
    return [ln for ln in text.splitlines() if ln and not ln.startswith("#")]


def test_default_units_run_the_runner_entry_point_from_this_repo_every_night(tmp_path: Path) -> None:
    values = role_vars()
    units = render_units(tmp_path, values)
    verify(tmp_path, "specsweep-nightly")
    assert lines(units["service"]) == [
        "[Unit]",
        "Description=specsweep nightly sweep and regression check",
        "Wants=network-online.target",
        "After=network-online.target",
        "[Service]",
        "Type=oneshot",
        f"WorkingDirectory={REPO}",
        'Environment="PYTHONUNBUFFERED=1"',
        f'ExecStart="{REPO}/.venv/bin/python" "{REPO}/scripts/nightly.py"',
        "TimeoutStartSec=72000",
        "KillMode=mixed",
        "TimeoutStopSec=180",
    ]
    assert lines(units["timer"]) == [
        "[Unit]",
        "Description=specsweep nightly at *-*-* 02:00:00",
        "[Timer]",
        "OnCalendar=*-*-* 02:00:00",
        "AccuracySec=60",
        "RandomizedDelaySec=0",
        "Persistent=true",
        "[Install]",
        "WantedBy=timers.target",
    ]


def test_arguments_environment_and_user_reach_the_unit_quoted(tmp_path: Path) -> None:
    values = role_vars(
        nightly_schedule_args=["-i", "inventory/gpu.yml", "-e", 'note=a  b $HOME 100% "q"'],
        nightly_schedule_env={"SPECSWEEP_ANALYSIS_CACHE": "/var/cache/spec sweep", "HOME": "/root"},
        nightly_schedule_user="specsweep",
        nightly_schedule_unit="nightly-test",
        nightly_schedule_persistent=False,
    )
    units = render_units(tmp_path, values)
    verify(tmp_path, "nightly-test")
    service = lines(units["service"])
    assert service[service.index("[Service]") + 1 :] == [
        "Type=oneshot",
        f"WorkingDirectory={REPO}",
        "User=specsweep",
        'Environment="HOME=/root"',
        'Environment="SPECSWEEP_ANALYSIS_CACHE=/var/cache/spec sweep"',
        f'ExecStart="{REPO}/.venv/bin/python" "{REPO}/scripts/nightly.py" "-i" "inventory/gpu.yml" "-e" '
        '"note=a  b $$HOME 100%% \\"q\\""',
        "TimeoutStartSec=72000",
        "KillMode=mixed",
        "TimeoutStopSec=180",
    ]
    assert "Persistent=false" in lines(units["timer"])


def test_a_command_that_does_not_exist_fails_validation(tmp_path: Path) -> None:
    """What `validate:` catches at install time: a wrong repo path or a missing venv."""
    render_units(tmp_path, role_vars(nightly_schedule_repo_dir=str(tmp_path / "no-repo")))
    res = analyze("verify", "--man=no", str(tmp_path / "specsweep-nightly.service"))
    assert res.returncode != 0, res.stderr + res.stdout
    assert "no-repo/.venv/bin/python" in res.stderr, res.stderr


def test_the_default_calendar_parses_and_prose_does_not() -> None:
    default = role_vars()["nightly_schedule_on_calendar"]
    good = analyze("calendar", default)
    assert good.returncode == 0 and "Next elapse:" in good.stdout, good.stderr
    assert analyze("calendar", "every night").returncode != 0
