"""specsweep_files, run as Ansible runs it on a host: one call installs every file that is absent or
different, leaves the rest, never shows a content, and writes nothing in check mode."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from module_runner import run_module

PRIVATE = "an operator's own prompt: é\n"


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def files(folder: Path, client: str = "print(1)\n", mode: str = "0644") -> list[dict[str, str]]:
    return [
        {"dest": str(folder / "bench.py"), "mode": mode, "content": client},
        {"dest": str(folder / "prompts.jsonl"), "mode": "0600", "content": PRIVATE},
    ]


def test_a_fresh_host_gets_every_file_with_its_mode_in_a_new_folder_and_a_second_call_changes_nothing(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "opt" / "bench"
    first = run_module("specsweep_files", {"files": files(folder)})
    assert first["changed"] is True and first["written"] == [
        str(folder / "bench.py"),
        str(folder / "prompts.jsonl"),
    ]
    assert (folder / "bench.py").read_text() == "print(1)\n" and mode_of(folder / "bench.py") == 0o644
    assert (folder / "prompts.jsonl").read_bytes() == PRIVATE.encode() and mode_of(
        folder / "prompts.jsonl"
    ) == 0o600
    assert mode_of(folder) == 0o755
    again = run_module("specsweep_files", {"files": files(folder)})
    assert (again["changed"], again["written"]) == (False, [])
    assert sorted(p.name for p in folder.iterdir()) == ["bench.py", "prompts.jsonl"]  # no temporary left


def test_only_a_changed_file_is_written_and_a_changed_mode_is_set(tmp_path: Path) -> None:
    run_module("specsweep_files", {"files": files(tmp_path)})
    newer = run_module("specsweep_files", {"files": files(tmp_path, client="print(2)\n")})
    assert newer["written"] == [str(tmp_path / "bench.py")]
    assert (tmp_path / "bench.py").read_text() == "print(2)\n"
    mode = run_module("specsweep_files", {"files": files(tmp_path, client="print(2)\n", mode="0755")})
    assert mode["written"] == [str(tmp_path / "bench.py")] and mode_of(tmp_path / "bench.py") == 0o755


def test_check_mode_says_what_it_would_write_and_writes_nothing(tmp_path: Path) -> None:
    got = run_module("specsweep_files", {"files": files(tmp_path / "b"), "_ansible_check_mode": True})
    assert got["changed"] is True and len(got["written"]) == 2
    assert not (tmp_path / "b").exists()


def test_a_content_is_never_in_the_result(tmp_path: Path) -> None:
    got = run_module("specsweep_files", {"files": files(tmp_path)})
    assert "operator's own prompt" not in json.dumps(got)
    assert (
        got["invocation"]["module_args"]["files"][1]["content"] != PRIVATE
    )  # masked, as Ansible masks no_log


def test_a_mode_that_is_not_octal_fails_before_anything_is_written(tmp_path: Path) -> None:
    got = run_module("specsweep_files", {"files": files(tmp_path, mode="rw-r--r--")})
    assert (
        got["failed"] is True and "mode must be octal permissions such as 0644, got 'rw-r--r--'" in got["msg"]
    )
    assert list(tmp_path.iterdir()) == []
