"""docs/settings.md is generated from the code that reads the settings, and is never stale."""

from __future__ import annotations

import subprocess
import sys

import yaml

from analysis.sweep import settings_doc
from analysis.sweep.request import SETTINGS


def test_the_committed_reference_is_what_the_code_generates() -> None:
    fresh = settings_doc.render()
    assert settings_doc.DOC.read_text(encoding="utf-8") == fresh, (
        "docs/settings.md is stale: run `python -m analysis settings --write docs/settings.md`"
    )


def test_every_setting_and_every_role_variable_has_a_row() -> None:
    text = settings_doc.render()
    assert all(f"| `{s.name}` |" in text for s in SETTINGS)
    for spec in settings_doc.ROOT.glob("roles/*/meta/argument_specs.yml"):
        options = yaml.safe_load(spec.read_text())["argument_specs"]["main"].get("options") or {}
        missing = [name for name in options if f"| `{name}` |" not in text]
        assert not missing, f"{spec}: {missing}"


def test_the_cli_prints_it() -> None:
    done = subprocess.run([sys.executable, "-m", "analysis", "settings"], capture_output=True, text=True,
                          check=False, cwd=settings_doc.ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == settings_doc.render()
