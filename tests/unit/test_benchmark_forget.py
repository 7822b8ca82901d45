"""The workload records copied to a host are removed when its sweep ends, unless kept
(roles/benchmark/tasks/forget.yml, run by playbooks/tasks/release.yml and playbooks/release.yml)."""

from __future__ import annotations

from pathlib import Path

import pytest
from local_play import run_local_play


@pytest.mark.parametrize("keep", [False, True])
def test_the_copied_records_go_when_the_sweep_ends_and_stay_when_kept(tmp_path: Path, keep: bool) -> None:
    work = tmp_path / "bench"
    work.mkdir()
    copy = work / "workloads-0123.jsonl"  # the copy the client read, named as the controller's file
    copy.write_text('{"prompt": "a customer prompt"}\n')
    other = work / "specsweep_bench.py"
    other.write_text("# the client\n")
    forget = {
        "name": "forget",
        "ansible.builtin.include_role": {"name": "benchmark", "tasks_from": "forget"},
        "vars": {
            "benchmark_work_dir": str(work),
            "benchmark_records": "/controller/cache/workloads-0123.jsonl",
            "benchmark_keep_records": keep,
        },
    }
    res = run_local_play(tmp_path, [forget])
    assert res.returncode == 0, res.stdout + res.stderr
    assert copy.exists() is keep
    assert other.exists(), "only the records' copy is removed"
