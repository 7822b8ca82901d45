"""Read a launch's checkpoint into the page cache ahead of it (stdlib only: runs on the host).

posix_fadvise(POSIX_FADV_WILLNEED) asks the kernel to read a file's pages in the background; a
server that then reads or maps the file finds them cached instead of waiting on slow storage.
"""

from __future__ import annotations

import os

# The weight files of a checkpoint folder (Hugging Face safetensors, llama.cpp GGUF).
WEIGHTS = (".safetensors", ".gguf")


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
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            asked += os.fstat(fd).st_size
        finally:
            os.close(fd)
    return asked
