"""llama.cpp's server (llama-server, or the bundled launcher that takes its flags), CPU, n-gram drafts.

The embedded default engine: the llama_server role installs its pinned engine, model and launcher.
Flags are llama-server's (`--spec-type ngram-mod`); the draft length (n-max) is the step count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from analysis.engines.base import (
    COMMON_SETTINGS,
    Engine,
    Point,
    SettingError,
    Settings,
    flag,
    number,
    port_of,
    text,
    words,
)
from analysis.engines.preflight import file_digests

NAME = "llama_cpp"
ALGORITHMS = ("ngram-mod",)
# The llama.cpp server's package among llama_server_packages: its pin is the engine's version.
PACKAGE = "xllamacpp"


def argv(config: Point, s: Settings, slots: int) -> list[str]:
    """llama-server for one config; `slots` parallel sequences (-np), one per concurrent request."""
    out = words(s, "command")
    if not out:
        raise SettingError("command: is required.")
    out += ["-m", text(s, "model_path", required=True)]
    out += ["--host", text(s, "host", required=True), "--port", str(port_of(s))]
    # -c is the whole context, shared by the slots: each gets ctx_size (threads go in the
    # environment, LLAMA_ARG_THREADS, where an env profile can vary them).
    ctx = number(s, "ctx_size", int, lambda n: n >= 64, "an integer >= 64", required=True)
    parallel = number(s, "parallel", int, lambda n: n >= 1, "an integer >= 1", required=True)
    slots = max(slots, parallel)
    out += ["-c", str(ctx * slots), "-np", str(slots)]
    if flag(s, "metrics"):
        out.append("--metrics")
    if config.speculative:
        # Required: a null inventory value would otherwise be rendered as the word "None".
        n_match = number(s, "ngram_n_match", int, lambda n: n >= 1, ">= 1", required=True)
        n_min = number(s, "ngram_n_min", int, lambda n: n >= 1, ">= 1", required=True)
        out += [
            "--spec-type", "ngram-mod",
            "--spec-ngram-mod-n-match", str(n_match),
            "--spec-ngram-mod-n-min", str(n_min),
            # The draft length is the step count: the CPU analogue of --speculative-num-steps.
            "--spec-ngram-mod-n-max", str(config.steps),
        ]  # fmt: skip
    return out + words(s, "extra_args")


def env(s: Settings) -> dict[str, Any]:
    """Threads as llama-server's LLAMA_ARG_THREADS (so a profile can vary them), then the user's env."""
    threads = number(s, "threads", int, lambda n: n >= 1, "an integer >= 1", required=True)
    return {"LLAMA_ARG_THREADS": str(threads), **(s.get("env") or {})}


def version(s: Settings) -> str | None:
    """The pinned engine package when the bundled launcher runs it; a llama-server of the operator's
    (llama_server_command) is not that package: its preflight records the build it reports."""
    command = words(s, "command")
    if command and not command[-1].endswith("/specsweep_llama_server.py"):
        return None
    return next((p for p in s.get("packages") or [] if str(p).startswith(PACKAGE)), None)


def problems(config: Point) -> list[str]:
    """Why llama.cpp cannot run a config: an algorithm other than its n-gram drafts."""
    if config.speculative and config.algorithm not in (None, *ALGORITHMS):
        return [f"algorithm: {config.algorithm!r} is not known to {NAME} (one of: {', '.join(ALGORITHMS)})"]
    return []


# ---------------------------------------------------------------------------------------------
# Preflight (roles/llama_server): what it installs and checks, and the version it reports
# ---------------------------------------------------------------------------------------------


def install_check(s: Mapping[str, Any]) -> dict[str, Any]:
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


def found_version(found: Mapping[str, Any], packages: Sequence[str]) -> str | None:
    """The llama.cpp engine a host runs: the build its own llama-server reported (engine_build,
    returned where version_argv asked for it), else the pinned engine package (None without one)."""
    if "engine_build" in found:
        return found["engine_build"]
    return next((p for p in packages if p.startswith(PACKAGE)), None)


ENGINE = Engine(
    name=NAME,
    role="llama_server",
    settings=(
        *COMMON_SETTINGS,
        "command",
        "ctx_size",
        "parallel",
        "metrics",
        "ngram_n_match",
        "ngram_n_min",
        "threads",
        "packages",
    ),
    argv=argv,
    base_env=env,
    version=version,
    problems=problems,
    algorithms=ALGORITHMS,
    # a 270M model on 2 CPU cores
    assumed_tps=40.0,
    # a GGUF of a few GB read from local disk into a CPU server (the demo's 270M: 2 s)
    assumed_load_s=10.0,
    # measured 1-2 s per launch over SSH (the test hosts) and 1 s on localhost (the demo)
    assumed_overhead_s=3.0,
    cpu_bound=True,
)
