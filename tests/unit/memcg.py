"""A memory cgroup small enough for the kernel's OOM killer to end a process the test puts in it."""

from __future__ import annotations

from pathlib import Path

LIMIT = 64 << 20
# Allocates 16 MiB at a time, at most 512 MiB (a bound should the limit not hold), then waits.
HOG = "import time\nheld = [bytearray(16 << 20) for _ in range(32)]\ntime.sleep(600)\n"


def memory_cgroup(name: str) -> Path:
    """A fresh memory cgroup (v2 where the memory controller is there, else v1) limited to 64 MiB;
    the caller removes it (rmdir) once its processes are gone."""
    root = Path("/sys/fs/cgroup")
    controllers = root / "cgroup.controllers"
    v2 = controllers.exists() and "memory" in controllers.read_text().split()
    group = root / name if v2 else root / "memory" / name
    group.mkdir()
    (group / ("memory.max" if v2 else "memory.limit_in_bytes")).write_text(str(LIMIT))
    if not v2:
        (group / "memory.swappiness").write_text("0")  # the kill, not swapping
    return group
