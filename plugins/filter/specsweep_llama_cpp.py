"""argv for llama.cpp's llama-server (or the bundled launcher that takes its flags)."""

from __future__ import annotations

from typing import Any


def llama_cpp_argv(config: dict[str, Any], server: dict[str, Any]) -> list[str]:
    """The exact argv list for one config; `server` holds the llama_server_* role settings."""
    argv = [str(a) for a in server["command"]]
    argv += ["-m", str(server["model_path"])]
    argv += ["--host", str(server["host"]), "--port", str(server["port"])]
    # Threads go in the environment (LLAMA_ARG_THREADS, llama-server's own name for -t), where an
    # env profile can vary them: on the command line they would win over any profile.
    argv += ["-c", str(server["ctx_size"]), "-np", str(server["parallel"])]
    if server.get("metrics", True):
        argv.append("--metrics")
    if config.get("speculative"):
        algorithm = config.get("algorithm") or "ngram-mod"
        if algorithm != "ngram-mod":
            raise ValueError(f"algorithm: llama_cpp supports ngram-mod only, got {algorithm!r}")
        if config.get("topk") is not None:
            raise ValueError("topk: llama_cpp n-gram speculation has no topk")
        argv += [
            "--spec-type", "ngram-mod",
            "--spec-ngram-mod-n-match", str(server["ngram_n_match"]),
            "--spec-ngram-mod-n-min", str(server["ngram_n_min"]),
            # The draft length is the step count: the CPU analogue of --speculative-num-steps.
            "--spec-ngram-mod-n-max", str(config["steps"]),
        ]  # fmt: skip
    argv += [str(a) for a in server.get("extra_args") or []]
    return argv


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {"llama_cpp_argv": llama_cpp_argv}
