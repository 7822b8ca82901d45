"""A run's client folder, with the workload records copied there, is removed when its sweep ends,
unless kept (roles/benchmark/tasks/forget.yml, run by playbooks/tasks/release.yml and
playbooks/release.yml)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from local_play import run_local_play


def forget(work_dir: str, keep: bool) -> dict:
    return {
        "name": "forget",
        "ansible.builtin.include_role": {"name": "benchmark", "tasks_from": "forget"},
        "vars": {"benchmark_work_dir": work_dir, "benchmark_keep_records": keep},
    }


@pytest.mark.parametrize("keep", [False, True])
def test_the_runs_folder_goes_with_the_copied_records_when_the_sweep_ends_and_stays_when_kept(
    tmp_path: Path, keep: bool
) -> None:
    bench = tmp_path / "bench"
    work = bench / "20261207T212014123456Z"  # this run's own folder (the plan's client_dir)
    work.mkdir(parents=True)
    copy = work / "workloads-0123.jsonl"  # the copy the client read, named as the controller's file
    copy.write_text('{"prompt": "a customer prompt"}\n')
    (work / "specsweep_bench.py").write_text("# the client\n")
    other = bench / "20261207T200000000000Z" / "specsweep_bench.py"  # another run's, running
    other.parent.mkdir()
    other.write_text("# its client\n")
    res = run_local_play(tmp_path, [forget(str(work), keep)])
    assert res.returncode == 0, res.stdout + res.stderr
    assert copy.exists() is keep and work.exists() is keep
    assert other.exists(), "another run's folder is left alone"


def test_a_plan_without_a_client_folder_removes_nothing(tmp_path: Path) -> None:
    res = run_local_play(tmp_path, [forget("", False)])
    assert res.returncode == 0, res.stdout + res.stderr
    assert re.search(r"ok=\d+ +changed=0 .* skipped=1 ", res.stdout), res.stdout
