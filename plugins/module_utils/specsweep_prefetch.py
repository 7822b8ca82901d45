"""Read a launch's checkpoint into the page cache ahead of it (stdlib only: runs on the host).

posix_fadvise(POSIX_FADV_WILLNEED) asks the kernel to read a file's pages in the background; a
server that then reads or maps the file finds them cached instead of waiting on slow storage.
"""

from __future__ import annotations

import os

# The weight files of a checkpoint folder (Hugging Face safetensors, llama.cpp GGUF).
WEIGHTS = (".safetensors", ".gguf")
# Linux reads at most one readahead window (read_ahead_kb, or the device's largest request) per
# WILLNEED call, whatever its length: on this project's machine one call for the whole 253 MB demo
# model read 8 MB. Asked for in pieces no larger than the smallest usual window, the whole file is read.
CHUNK = 128 << 10


def checkpoint_files(paths: list[str]) -> tuple[list[str], list[str]]:
    """The weight files of `paths` (a file itself; a folder's *.safetensors / *.gguf, not nested),
    and the paths that do not exist."""
    files, missing = [], []
    for path in paths:
        if os.path.isfile(path):
            files.append(path)
        elif os.path.isdir(path):
            files += sorted(e.path for e in os.scandir(path) if e.is_file() and e.name.endswith(WEIGHTS))
        else:
            missing.append(path)
    return files, missing


def willneed(files: list[str]) -> int:
    """Ask the kernel to read each file into the page cache (it returns before the reads finish);
    the bytes asked for. A file that cannot be opened is passed over: the server's own read says why."""
    asked = 0
    for path in files:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            size = os.fstat(fd).st_size
            for offset in range(0, size, CHUNK):
                os.posix_fadvise(fd, offset, CHUNK, os.POSIX_FADV_WILLNEED)
            asked += size
        finally:
            os.close(fd)
    return asked
