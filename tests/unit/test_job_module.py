"""plugins/modules/specsweep_job.py through a real ansible-playbook on this machine: a detached
client followed in slices, its result, its failure, and a stale job replaced."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from local_play import run_local_play

# A client that reports on stderr, works a while, then prints its document.
CLIENT = (
    "import sys, time\n"
    "print('repeat 1/2', file=sys.stderr, flush=True)\n"
    "time.sleep(float(sys.argv[1]))\n"
    "print('repeat 2/2', file=sys.stderr, flush=True)\n"
    "print('{\"ok\": 1}')\n"
    "sys.exit(int(sys.argv[2]))\n"
)


def job(
    path: Path, token: str, seconds: float, name: str, rc: int = 0, follow: bool = False
) -> dict[str, Any]:
    """A specsweep_job task running CLIENT, registered as `name`; `follow`: repeat it until done."""
    argv = [sys.executable, "-c", CLIENT, str(seconds), str(rc)]
    task: dict[str, Any] = {"specsweep_job": {"argv": argv, "path": str(path), "token": token, "slice_s": 1},
                            "register": name, "ignore_errors": rc != 0}  # fmt: skip
    if follow:
        task.update(until=f"{name} is failed or {name}.done", retries=60, delay=0)
    return task


def test_a_job_reports_progress_then_its_output_keeps_a_failure_and_replaces_a_stale_job(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bench.json"
    results = tmp_path / "results.json"
    proc = run_local_play(tmp_path, [
        job(path, "run1", 4, "first"),
        job(path, "run1", 4, "second", follow=True),
        job(path, "run2", 0.1, "third", rc=3, follow=True),
        job(path, "run3", 60, "fourth"),
        job(path, "run4", 0.1, "fifth", follow=True),
        {"ansible.builtin.copy": {"dest": str(results), "mode": "0644", "content": "{{ found | to_json }}"},
         "vars": {"names": ["first", "second", "third", "fourth", "fifth"],
                  "found": "{{ dict(names | zip(names | map('extract', vars))) }}"}},
    ])  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    r = json.loads(results.read_text())
    # A slice ends with the client still running: its last stderr line is the progress.
    assert (r["first"]["done"], r["first"]["progress"]) == (False, "repeat 1/2")
    # The same token follows that job (same pid) to its end instead of starting another.
    assert (r["second"]["done"], r["second"]["rc"], r["second"]["pid"]) == (True, 0, r["first"]["pid"])
    assert r["second"]["stdout"] == '{"ok": 1}'
    assert r["second"]["stderr"].splitlines() == ["repeat 1/2", "repeat 2/2"]
    # A non-zero exit fails like command, keeping what the client printed.
    assert (r["third"]["failed"], r["third"]["rc"], r["third"]["stdout"]) == (True, 3, '{"ok": 1}')
    # Another token replaces a job still running: the old one is stopped.
    assert r["fourth"]["done"] is False and r["fifth"]["rc"] == 0
    stale = Path(f"/proc/{r['fourth']['pid']}/cmdline")
    assert not stale.exists() or "repeat 1/2" not in stale.read_text(errors="replace")
