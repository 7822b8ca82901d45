"""What every engine role's preflight shares: the digests of files it puts on a host, the pip
command that installs pins, and the checkpoints it checks there. Each engine's own preflight (what
it installs or has the host's engine validate) is in that engine's module."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any


def file_digests(texts: Mapping[str, str]) -> dict[str, str]:
    """Each host path with the sha1 of the text the controller puts there: what specsweep_host_facts
    compares (its `files`), so a host that has them all copies nothing."""
    return {path: hashlib.sha1(text.encode()).hexdigest() for path, text in texts.items()}


def pip_install_argv(s: Mapping[str, Any]) -> list[str]:
    """The pip command that installs the `packages` into the venv of `python`, quietly, with the
    operator's `extra_args` (an offline wheelhouse, an index) before them."""
    quiet = ["--quiet", "--disable-pip-version-check"]
    return [str(s["python"]), "-m", "pip", "install", *quiet, *s["extra_args"], *s["packages"]]


def local_checkpoints(paths: Sequence[str | None]) -> list[dict[str, str]]:
    """The model paths that are checkpoint folders on the host (absolute), to be checked there; a
    Hugging Face repo id (or no path: no draft model) is left to the engine, which fetches it."""
    return [{"path": p, "format": "hf"} for p in paths if p and p.startswith("/")]


def target_identity(identities: Sequence[Any], model_path: str | None) -> Any:
    """The target model's identity among those of `local_checkpoints([model, draft])`: the first, when
    the model itself was checked; None for a repo id (the first would then be the draft's)."""
    checked = local_checkpoints([model_path])
    return identities[0] if checked and identities else None
