"""-e prefetch: the next launch's checkpoint read into the page cache during a benchmark (the host
module specsweep_prefetch, stdlib; which paths the plan hands it; what the fact records)."""

from __future__ import annotations

import ctypes
import mmap
import os
import time
from pathlib import Path

from module_runner import module_utils, run_module
from test_record import run_payload
from test_sweep_plan import SGLANG, build, llama

from analysis.facts import record
from analysis.sweep import outcome, plan

LIBC = ctypes.CDLL(None, use_errno=True)


def resident(path: Path) -> float:
    """The share of `path`'s pages in the page cache (mincore over a private mapping of it)."""
    size = path.stat().st_size
    pages = -(-size // mmap.PAGESIZE)
    vec = (ctypes.c_ubyte * pages)()
    # Private and writable only so ctypes can take its address; nothing is written.
    with path.open("rb") as f, mmap.mmap(f.fileno(), size, mmap.MAP_PRIVATE) as m:
        start = ctypes.c_char.from_buffer(m)
        status = LIBC.mincore(ctypes.c_void_p(ctypes.addressof(start)), ctypes.c_size_t(size), vec)
        del start  # the mapping closes only without exports
    if status != 0:
        raise OSError(ctypes.get_errno(), "mincore")
    return sum(v & 1 for v in vec) / pages


def evicted(path: Path, size: int) -> Path:
    """A file of `size` bytes on disk, written out and dropped from the page cache."""
    path.write_bytes(os.urandom(size))
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return path


def test_a_checkpoint_folder_is_its_weight_files_and_a_missing_path_is_named(tmp_path: Path) -> None:
    helper = module_utils("specsweep_prefetch")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    for name in ("model-00002.safetensors", "model-00001.safetensors", "config.json", "tokenizer.json"):
        (ckpt / name).write_bytes(b"x" * 10)
    (ckpt / "nested").mkdir()
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"y" * 5)
    files, missing = helper.checkpoint_files([str(ckpt), str(gguf), str(tmp_path / "gone")])
    assert files == [str(ckpt / "model-00001.safetensors"), str(ckpt / "model-00002.safetensors"), str(gguf)]
    assert missing == [str(tmp_path / "gone")]
    assert helper.willneed(files) == 25


def test_the_module_returns_at_once_and_the_file_comes_into_the_page_cache(tmp_path: Path) -> None:
    # Larger than a readahead window (8 MB here): one WILLNEED call for the whole file reads only that.
    weights = evicted(tmp_path / "w.gguf", 40 << 20)
    if resident(weights) > 0.5:  # a filesystem that keeps everything in memory proves nothing
        raise AssertionError(f"{tmp_path} kept the file cached after DONTNEED: put tmp_path on a disk")
    result = run_module("specsweep_prefetch", {"paths": [str(weights), str(tmp_path / "none")]})
    assert (result["files"], result["bytes"], result["missing"]) == (1, 40 << 20, [str(tmp_path / "none")])
    assert result["changed"] is False
    deadline = time.monotonic() + 20
    while resident(weights) < 1.0 and time.monotonic() < deadline:
        time.sleep(0.05)  # polling the page cache the detached child fills
    assert resident(weights) == 1.0


def test_check_mode_lists_the_files_and_reads_nothing(tmp_path: Path) -> None:
    weights = evicted(tmp_path / "w.gguf", 1 << 20)
    result = run_module("specsweep_prefetch", {"paths": [str(weights)], "_ansible_check_mode": True})
    assert (result["files"], result["bytes"]) == (1, 1 << 20)
    assert resident(weights) < 0.5


def test_the_plan_hands_each_host_its_checkpoints_unless_turned_off(tmp_path: Path) -> None:
    built = build([llama(), plan.HostInput("g1", "sglang", SGLANG)], tmp_path, steps=2)
    assert built["hosts"]["h0"]["prefetch"] == ["/models/gemma.gguf"]
    assert built["hosts"]["g1"]["prefetch"] == ["/models/Kimi-K2.5-int4", "/models/Kimi-K2.5-eagle3"]
    off = build([llama()], tmp_path, steps=2, prefetch="false")
    assert off["hosts"]["h0"]["prefetch"] == [] and off["sweep"]["settings"]["prefetch"] is False


def test_the_fact_records_what_was_read_ahead_during_its_benchmark() -> None:
    asked = {"changed": False, "files": 3, "bytes": 1234, "missing": []}
    fact = record.build_fact(outcome.payload(run_payload(prefetch=asked), None, []))
    assert fact.prefetch is not None and (fact.prefetch.files, fact.prefetch.bytes) == (3, 1234)
    # Off, or skipped (a follower, no paths): nothing recorded.
    for result in (None, {"changed": False, "skipped": True}):
        assert record.build_fact(outcome.payload(run_payload(prefetch=result), None, [])).prefetch is None
