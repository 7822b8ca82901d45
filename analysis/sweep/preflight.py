"""An engine role's preflight on a host: what it asks specsweep_host_facts to check, the argv that
installs what was missing, and the engine version it tells the sweep.

llama_server installs its pinned engine, model and launcher (llama_server_install); sglang_server
only checks (SGLang is the operator's). Settings are a role's variables by short name, as the
roles hand them to the specsweep_preflight filters.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from analysis.redact import redact_argv
from analysis.sweep import sglang_releases

# The llama.cpp server's package among llama_server_packages: its pin is the engine's version.
LLAMA_CPP_PACKAGE = "xllamacpp"


def file_digests(texts: Mapping[str, str]) -> dict[str, str]:
    """Each host path with the sha1 of the text the controller puts there: what specsweep_host_facts
    compares (its `files`), so a host that has them all copies nothing."""
    return {path: hashlib.sha1(text.encode()).hexdigest() for path, text in texts.items()}


def llama_cpp_install_check(s: Mapping[str, Any]) -> dict[str, Any]:
    """What of llama_server's install the preflight checks: the venv's python, the pins and the
    launcher's digest; none of it when the role installs nothing (`install` false)."""
    if not s["install"]:
        return {"python": None, "packages": [], "files": {}}
    return {
        "python": f"{s['venv']}/bin/python",
        "packages": list(s["packages"]),
        "files": file_digests({s["launcher"]: s["launcher_text"]}),
    }


def version_argv(command: Sequence[str], launcher: str) -> list[str] | None:
    """An operator's own llama-server (a command that does not run the bundled launcher) with
    --version, which prints its build; None for the launcher, whose version is its pin."""
    return None if launcher in command else [*command, "--version"]


def llama_cpp_version(found: Mapping[str, Any], packages: Sequence[str]) -> str | None:
    """The llama.cpp engine a host runs: the build its own llama-server reported (engine_build,
    returned where version_argv asked for it), else the pinned engine package (None without one)."""
    if "engine_build" in found:
        return found["engine_build"]
    return next((p for p in packages if p.startswith(LLAMA_CPP_PACKAGE)), None)


def pip_install_argv(s: Mapping[str, Any]) -> list[str]:
    """The pip command that installs the `packages` into the venv of `python`, quietly, with the
    operator's `extra_args` (an offline wheelhouse, an index) before them."""
    quiet = ["--quiet", "--disable-pip-version-check"]
    return [str(s["python"]), "-m", "pip", "install", *quiet, *s["extra_args"], *s["packages"]]


def local_checkpoints(paths: Sequence[str | None]) -> list[dict[str, str]]:
    """The model paths that are checkpoint folders on the host (absolute), to be checked there; a
    Hugging Face repo id (or no path: no draft model) is left to SGLang, which fetches it."""
    return [{"path": p, "format": "hf"} for p in paths if p and p.startswith("/")]


def target_identity(identities: Sequence[Any], model_path: str | None) -> Any:
    """The target model's identity among those of `local_checkpoints([model, draft])`: the first, when
    the model itself was checked; None for a repo id (the first would then be the draft's)."""
    checked = local_checkpoints([model_path])
    return identities[0] if checked and identities else None


def sglang_check_input(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What roles/sglang_server/files/specsweep_sglang_check.py reads on the host: each planned
    config's flags (after `python -m sglang.launch_server`), the API key redacted (it parses alike),
    and the SGLANG_* variables of its environment (SGLang's resolution reads them; the rest, NCCL's
    and any token, stays out of the check)."""
    return {
        "argvs": {e["config"]["id"]: redact_argv(e["argv"])[3:] for e in entries},
        "envs": {
            e["config"]["id"]: {k: v for k, v in (e.get("env") or {}).items() if k.startswith("SGLANG_")}
            for e in entries
        },
    }


def sglang_found(checked: Mapping[str, Any], on: Mapping[str, Any]) -> dict[str, Any]:
    """The version, git SHA and problems of the host's SGLang check (`checked`: the registered
    command; skipped when the host had problems already, or nothing to check), for `on` (host,
    the version the plan was spelt for)."""
    if checked.get("skipped"):
        return {"version": None, "git_sha": None, "problems": []}
    found = json.loads(checked["stdout"])
    problems = sglang_check_problems(found, str(on["host"]), on.get("version"))
    return {"version": found.get("version"), "git_sha": found.get("git_sha"), "problems": problems}


def sglang_check_problems(found: Mapping[str, Any], host: str, version: str | None) -> list[str]:
    """Why the host's own SGLang refuses the plan: it cannot be imported, it is another release than
    the argv was spelt for (`version`, sglang_server_version), or it refuses a config's argv (naming
    the config, the flag and SGLang's own message)."""
    if found.get("error"):
        return [f"sglang_server_python: {host}: SGLang's parser cannot be imported: {found['error']}"]
    has = str(found.get("version"))
    planned = version or sglang_releases.LAST_RELEASE
    try:
        differs = sglang_releases.release(has) != sglang_releases.release(planned)
    except sglang_releases.ReleaseError as exc:
        return [f"sglang_server_version: {host}: {exc}"]
    if differs:
        return [
            f"sglang_server_version: {host} runs SGLang {has}, whose flags differ from those of {planned} "
            f"the plan was spelt for; set sglang_server_version: {has} for this host"
        ]
    return [
        f"{host}: {config_id}: SGLang {has} refuses {why['flag'] or 'the argv'}: {why['message']}"
        for config_id, why in (found.get("results") or {}).items()
        if why
    ]
