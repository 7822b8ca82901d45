"""Parse and resolve every planned SGLang argv with the host's own SGLang, in one process.

Run with the interpreter SGLang is installed under (sglang_server_python); stdlib only, besides the
`sglang` it imports there. Reads {"argvs": {config_id: [flags after `-m sglang.launch_server`]},
"envs": {config_id: {SGLANG_* variable: value}}} on stdin and prints one JSON document: the SGLang
version, the git SHA its install records (a VCS install's direct_url.json; null for a wheel) and,
per config, None or SGLang's own refusal.

Each argv goes through `prepare_server_args` (SGLang's argparse parser) and `resolve_once` where
the release has it (0.5.20 on; older releases resolve while the ServerArgs is built). Resolution
launches nothing and loads no weights; it reads the model's config.json (model_path, or the hub's
for a repo id, as the launch would) and asks the GPU its memory size (SGLang's own
get_device_memory_capacity). Each config resolves under its own SGLANG_* variables, as it
launches; the environment (which handlers change too) is put back before the next.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
import os
import re
import sys
from typing import Any

FLAG = re.compile(r"(--[a-z0-9][a-z0-9-]*)")


def refusal(argv: list[str], message: str) -> dict[str, Any]:
    """SGLang's message and the flag it names (the first --flag in it that the argv holds, else the
    first it names at all; None when it names none)."""
    named = FLAG.findall(message)
    given = [f for f in named if f in argv]
    return {"flag": (given or named or [None])[0], "message": message.strip()}


def check(prepare: Any, argv: list[str], env: dict[str, str]) -> dict[str, Any] | None:
    """None when SGLang parses and resolves `argv` under the variables `env`; else its refusal."""
    saved = dict(os.environ)
    errors = io.StringIO()
    try:
        os.environ.update(env)
        with contextlib.redirect_stderr(errors):
            server_args = prepare(argv)
            resolve = getattr(server_args, "resolve_once", None)
            if resolve is not None:
                resolve()
    except SystemExit:  # argparse: the usage line, then "error: ..."
        lines = [line for line in errors.getvalue().splitlines() if line.strip()]
        return refusal(argv, lines[-1] if lines else "argparse refused the arguments")
    except Exception as exc:  # any refusal of SGLang's is reported, not raised
        return refusal(argv, f"{type(exc).__name__}: {exc}")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return None


def git_sha() -> str | None:
    """The commit a VCS install of sglang records (PEP 610 direct_url.json), else None."""
    try:
        text = importlib.metadata.distribution("sglang").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return None
    info = json.loads(text or "{}").get("vcs_info") or {}
    return info.get("commit_id")


def main() -> int:
    asked = json.load(sys.stdin)
    try:
        import sglang
        from sglang.srt.server_args import prepare_server_args
    except Exception as exc:  # reported: the sweep cannot use this SGLang
        error = f"{type(exc).__name__}: {exc}"
        print(json.dumps({"version": None, "git_sha": None, "error": error, "results": {}}))
        return 0
    envs = asked.get("envs") or {}
    results = {
        cid: check(prepare_server_args, list(argv), dict(envs.get(cid) or {}))
        for cid, argv in asked["argvs"].items()
    }
    found = {"version": getattr(sglang, "__version__", None), "git_sha": git_sha(), "error": None}
    print(json.dumps({**found, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
