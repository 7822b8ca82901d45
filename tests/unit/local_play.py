"""Run a play of the given tasks on this machine with the real ansible-playbook and the repo's ansible.cfg."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def run_local_play(tmp_path: Path, tasks: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    """`ansible-playbook` of one play on localhost (no facts) from the repo root; not checked."""
    play = tmp_path / "play.yml"
    play.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    return subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), str(play)],
        capture_output=True, text=True, cwd=REPO, timeout=300, check=False,
    )  # fmt: skip
