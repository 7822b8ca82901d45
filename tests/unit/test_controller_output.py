"""What an operator sees first: ansible-playbook starts without a Python warning above its output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_ansible_playbook_starts_without_a_python_warning() -> None:
    # cryptography 51 deprecates DSA, which ansible-core 2.19 imports at start: a warning on every run.
    done = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "--version"], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "core 2.19" in done.stdout, done.stdout
    assert "Warning" not in done.stderr, done.stderr
