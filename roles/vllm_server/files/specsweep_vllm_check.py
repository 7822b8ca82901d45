"""Parse and resolve every planned vLLM argv with the host's own vLLM, in one process.

Run with the interpreter vLLM is installed under (vllm_server_python); stdlib only, besides the
`vllm` it imports there. Reads {"argvs": {config_id: [words after the `vllm` script]}} on stdin
(`serve MODEL --flag ...`) and prints one JSON document: the vLLM version and, per config, None or
vLLM's own refusal.

Each argv goes through `vllm serve`'s own parser (vllm/entrypoints/cli/serve.py
ServeSubcommand.subparser_init, which builds it with make_arg_parser), its pre-load checks
(validate_parsed_serve_args) and EngineArgs.create_engine_config, which builds the
SpeculativeConfig from --speculative-config as a launch would. That launches nothing and loads no
weights; it reads the models' config.json (as the launch would) and asks the platform about its
devices. The environment is put back before the next argv.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
from typing import Any

FLAG = re.compile(r"(--[a-z0-9][a-z0-9-]*)")


def refusal(argv: list[str], message: str) -> dict[str, Any]:
    """vLLM's message and the flag it names (the first --flag in it that the argv holds, else the
    first it names at all; None when it names none)."""
    named = FLAG.findall(message)
    given = [f for f in named if f in argv]
    return {"flag": (given or named or [None])[0], "message": message.strip()}


def check(resolve: Any, argv: list[str]) -> dict[str, Any] | None:
    """None when vLLM parses and resolves `argv`; else its refusal."""
    saved = dict(os.environ)
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            resolve(argv)
    except SystemExit:  # argparse: the usage line, then "error: ..."
        lines = [line for line in errors.getvalue().splitlines() if line.strip()]
        return refusal(argv, lines[-1] if lines else "argparse refused the arguments")
    except Exception as exc:  # any refusal of vLLM's is reported, not raised
        return refusal(argv, f"{type(exc).__name__}: {exc}")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return None


def main() -> int:
    asked = json.load(sys.stdin)
    # vLLM logs to stdout (its handler takes sys.stdout when vllm is imported): this script's stdout
    # is its one JSON document, so vLLM's lines go to stderr.
    out, sys.stdout = sys.stdout, sys.stderr
    # serve's own pre-load check by the name serve.py imports it under (its module moved:
    # entrypoints/launchers/cli_args.py in 0.32.0, entrypoints/common/cli_args.py in 0.33.0).
    try:
        import vllm
        from vllm.engine.arg_utils import EngineArgs
        from vllm.entrypoints.cli.serve import ServeSubcommand, validate_parsed_serve_args
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except Exception as exc:  # reported: the sweep cannot use this vLLM
        print(json.dumps({"version": None, "error": f"{type(exc).__name__}: {exc}", "results": {}}), file=out)
        return 0

    def resolve(argv: list[str]) -> None:
        parser = FlexibleArgumentParser(prog="vllm")
        ServeSubcommand().subparser_init(parser.add_subparsers(dest="subparser"))
        args = parser.parse_args(argv)
        if getattr(args, "model_tag", None) is not None:
            args.model = args.model_tag  # as `vllm serve` does (ServeSubcommand.cmd)
        validate_parsed_serve_args(args)
        EngineArgs.from_cli_args(args).create_engine_config()

    results = {cid: check(resolve, list(argv)) for cid, argv in asked["argvs"].items()}
    print(
        json.dumps({"version": getattr(vllm, "__version__", None), "error": None, "results": results}),
        file=out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
