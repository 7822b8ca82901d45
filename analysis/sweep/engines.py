"""Each engine's launch command: the exact argv (a list, never shell-joined) for one config on one host.

An engine reads its role's variables (`llama_server_*`, `sglang_server_*`; the plan resolves them per
host, with the role's defaults) under their short names. SGLang flags are spelt for the host's
release (analysis.sweep.sglang_releases) and checked against SGLang 0.5.23's own argument
definitions (tests/unit/fixtures/sglang_0.5.23_flags.txt); what makes a config valid lives in
analysis.sweep.config, what makes a host's settings valid lives here.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from analysis.sweep import sglang_releases
from analysis.sweep.config import DRAFT_REQUIRED, Config, engine_problems

Settings = Mapping[str, Any]


class SettingError(ValueError):
    """A host setting that cannot be rendered; the message starts with '<variable>: '."""


def _text(s: Settings, key: str, *, required: bool = False) -> str | None:
    """A string setting; refuses a leading '-' that argparse would read as a flag."""
    value = s.get(key)
    if value is None or value == "":
        if required:
            raise SettingError(f"{key}: is required.")
        return None
    if not isinstance(value, str):
        raise SettingError(f"{key}: must be a string, got {type(value).__name__}.")
    if value.startswith("-"):
        raise SettingError(f"{key}: must not start with '-' (argparse would read it as a flag).")
    if "\0" in value or "\n" in value:
        raise SettingError(f"{key}: must not contain a newline or NUL.")
    return value


def _number(
    s: Settings,
    key: str,
    cast: Callable[[Any], Any],
    ok: Callable[[Any], bool],
    rule: str,
    *,
    required: bool = False,
) -> Any:
    """A numeric setting; inventory values may arrive as strings, so they are cast."""
    value = s.get(key)
    if value is None or value == "":
        if required:
            raise SettingError(f"{key}: is required.")
        return None
    if isinstance(value, bool):
        raise SettingError(f"{key}: must be {rule}, got {value!r}.")
    try:
        number = cast(value)
    except (TypeError, ValueError):
        raise SettingError(f"{key}: must be {rule}, got {value!r}.") from None
    if (cast is int and isinstance(value, float) and value != number) or not ok(number):
        raise SettingError(f"{key}: must be {rule}, got {value!r}.")
    return number


def _flag(s: Settings, key: str) -> bool:
    """A true/false setting; a string "false" would be truthy, so a real YAML boolean is required."""
    value = s.get(key, False)
    if not isinstance(value, bool):
        raise SettingError(f"{key}: must be true or false, got {value!r}.")
    return value


def _words(s: Settings, key: str) -> list[str]:
    """A list of argv words (numbers are taken as their text)."""
    value = s.get(key) or []
    if not isinstance(value, list) or not all(isinstance(w, str | int | float) for w in value):
        raise SettingError(f"{key}: must be a list of strings.")
    words = [str(w) for w in value]
    if any("\0" in w for w in words):
        raise SettingError(f"{key}: an item contains a NUL byte.")
    return words


def _port(s: Settings) -> int:
    return _number(s, "port", int, lambda n: 0 < n < 65536, "a port number", required=True)


# ---------------------------------------------------------------------------------------------
# llama.cpp (llama-server, or the bundled launcher that takes its flags)
# ---------------------------------------------------------------------------------------------


def llama_cpp_argv(config: Config, s: Settings, slots: int) -> list[str]:
    """llama-server for one config; `slots` parallel sequences (-np), one per concurrent request."""
    argv = _words(s, "command")
    if not argv:
        raise SettingError("command: is required.")
    argv += ["-m", _text(s, "model_path", required=True)]
    argv += ["--host", _text(s, "host", required=True), "--port", str(_port(s))]
    # -c is the whole context, shared by the slots: each gets ctx_size (threads go in the
    # environment, LLAMA_ARG_THREADS, where an env profile can vary them).
    ctx = _number(s, "ctx_size", int, lambda n: n >= 64, "an integer >= 64", required=True)
    parallel = _number(s, "parallel", int, lambda n: n >= 1, "an integer >= 1", required=True)
    slots = max(slots, parallel)
    argv += ["-c", str(ctx * slots), "-np", str(slots)]
    if _flag(s, "metrics"):
        argv.append("--metrics")
    if config.speculative:
        # Required: a null inventory value would otherwise be rendered as the word "None".
        n_match = _number(s, "ngram_n_match", int, lambda n: n >= 1, ">= 1", required=True)
        n_min = _number(s, "ngram_n_min", int, lambda n: n >= 1, ">= 1", required=True)
        argv += [
            "--spec-type", "ngram-mod",
            "--spec-ngram-mod-n-match", str(n_match),
            "--spec-ngram-mod-n-min", str(n_min),
            # The draft length is the step count: the CPU analogue of --speculative-num-steps.
            "--spec-ngram-mod-n-max", str(config.steps),
        ]  # fmt: skip
    return argv + _words(s, "extra_args")


def llama_cpp_env(s: Settings) -> dict[str, Any]:
    """Threads as llama-server's LLAMA_ARG_THREADS (so a profile can vary them), then the user's env."""
    threads = _number(s, "threads", int, lambda n: n >= 1, "an integer >= 1", required=True)
    return {"LLAMA_ARG_THREADS": str(threads), **(s.get("env") or {})}


def llama_cpp_version(s: Settings) -> str | None:
    """The pinned engine package when the bundled launcher runs it; a llama-server of the operator's
    (llama_server_command) is not that package: its preflight records the build it reports."""
    command = _words(s, "command")
    if command and not command[-1].endswith("/specsweep_llama_server.py"):
        return None
    return next((p for p in s.get("packages") or [] if str(p).startswith("xllamacpp")), None)


# ---------------------------------------------------------------------------------------------
# SGLang (python -m sglang.launch_server)
# ---------------------------------------------------------------------------------------------


def _sglang_spec(config: Config, s: Settings) -> list[str]:
    """The --speculative-* part of the argv."""
    # A config without an algorithm takes the host's (sglang_server_speculative_algorithm).
    name = (config.algorithm or _text(s, "speculative_algorithm") or "").upper()
    if not name:
        raise SettingError("speculative_algorithm: required when a config names no algorithm.")
    problems = engine_problems(msgspec.structs.replace(config, algorithm=name), "sglang")
    if problems and config.algorithm is None:
        raise SettingError(f"speculative_algorithm: {problems[0].split(': ', 1)[1]}")
    argv = ["--speculative-algorithm", name]
    steps, topk, draft = config.steps, config.topk, config.draft_tokens
    if name == "NGRAM":
        # NGRAM drafts from a suffix trie of the context: the host's draft model is not passed, so
        # one host can sweep NGRAM beside EAGLE3. Steps are passed too: otherwise SGLang derives
        # draft_tokens // bfs-breadth, which is 0 for short drafts.
        tokens = steps + 1 if draft is None else draft
        return [*argv, "--speculative-num-steps", str(steps), "--speculative-num-draft-tokens", str(tokens)]
    draft_path = _text(s, "draft_model_path")
    if draft_path is None and name in DRAFT_REQUIRED:
        raise SettingError(
            f"draft_model_path: {name} needs a draft model; use NEXTN for MTP layers "
            "shipped inside the target checkpoint."
        )
    if draft_path is not None:
        argv += ["--speculative-draft-model-path", draft_path]
    # Steps, topk and draft tokens go together: steps alone crashes SGLang and topk without steps
    # trips an assert (speculative_hook.py); topk 1 forces draft tokens to steps + 1.
    topk = 1 if topk is None else topk
    draft = steps + 1 if draft is None else draft
    argv += ["--speculative-num-steps", str(steps), "--speculative-eagle-topk", str(topk)]
    return [*argv, "--speculative-num-draft-tokens", str(draft)]


def _sglang_multinode(s: Settings) -> list[str]:
    """--nnodes/--node-rank/--dist-init-addr, only when the server spans several nodes."""
    nnodes = _number(s, "nnodes", int, lambda n: n >= 1, "an integer >= 1")
    node_rank = _number(s, "node_rank", int, lambda n: n >= 0, "an integer >= 0")
    addr = _text(s, "dist_init_addr")
    if nnodes is None or nnodes == 1:
        if addr is not None or node_rank not in (None, 0):
            raise SettingError("nnodes: node_rank/dist_init_addr are set but nnodes is not > 1.")
        return []
    if node_rank is None:
        raise SettingError("node_rank: required when nnodes > 1.")
    if node_rank >= nnodes:
        raise SettingError(f"node_rank: must be below nnodes ({nnodes}), got {node_rank}.")
    if addr is None:
        raise SettingError("dist_init_addr: required when nnodes > 1 (host:port of rank 0).")
    return ["--nnodes", str(nnodes), "--node-rank", str(node_rank), "--dist-init-addr", addr]


def _last_values(words: list[str], flags: tuple[str, ...]) -> list[str] | None:
    """The value words of the last of `flags` in `words` (argparse keeps the last; `--f=v` too),
    None when none is there."""
    found = None
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if name in flags:
            rest = words[i + 1 :]
            found = [value] if eq else list(itertools.takewhile(lambda w: not w.startswith("-"), rest))
    return found


def _own_limit(s: Settings, flags: tuple[str, ...]) -> int | None:
    """The largest value the operator gave one of `flags` in extra_args (None: not given)."""
    values = _last_values(_words(s, "extra_args"), flags)
    if values is None:
        return None
    try:
        return max(int(v) for v in values)
    except ValueError:
        raise SettingError(f"extra_args: {flags[0]} needs integers, got {values!r}.") from None


# The operator's own decode CUDA-graph sizes, in every spelling a 0.5.x release takes; a graph
# config of another shape (--cuda-graph-config, --disable-cuda-graph, ...) is theirs, left alone.
_OWN_GRAPH_FLAGS = (
    "--cuda-graph-max-bs-decode", "--cuda-graph-bs-decode", "--cuda-graph-max-bs", "--cuda-graph-bs",
)  # fmt: skip
_OTHER_GRAPH_FLAGS = (
    "--cuda-graph-config", "--disable-cuda-graph", "--disable-decode-cuda-graph",
    "--cuda-graph-backend-decode",
)  # fmt: skip


def _sglang_capacity(s: Settings, graph_bs_flag: str, own_max_bs: int | None) -> list[str]:
    """The same capacity on every config, the baseline included: every concurrency level of the sweep
    runs at once and decodes in a CUDA graph of its size. Without these, SGLang 0.5.23 runs a
    speculative server at 48 requests at most (arg_groups/speculative_hook.py), so its decode graphs
    stop at 48 too (model_executor/runner/base_cuda_graph_runner.py caps them to the request pool),
    while the baseline sizes both from GPU memory. An operator's own value wins; a level above it is
    refused, naming both."""
    levels = sorted(set(s.get("levels") or ()))
    if not levels:
        return []
    top = levels[-1]
    argv = []
    running = _own_limit(s, ("--max-running-requests",))
    if running is None:
        argv += ["--max-running-requests", str(top)]
    elif running < top:
        raise SettingError(
            f"extra_args: --max-running-requests {running} is below the sweep's concurrency level {top}: "
            f"SGLang would queue what the client counts as running; raise it to {top} or drop the level."
        )
    graphs = _own_limit(s, _OWN_GRAPH_FLAGS)
    if own_max_bs is not None and own_max_bs < top:
        raise SettingError(
            f"cuda_graph_max_bs_decode: {own_max_bs} is below the sweep's concurrency level {top}: larger "
            f"decode batches run without CUDA graphs; raise it to {top} or leave it null (the sweep's levels "
            "are then captured)."
        )
    if graphs is not None and graphs < top:
        raise SettingError(
            f"extra_args: decode CUDA graphs up to {graphs} ({'/'.join(_OWN_GRAPH_FLAGS[:2])}) are below "
            f"the sweep's concurrency level {top}: larger decode batches run without CUDA graphs; raise it "
            f"to {top}."
        )
    other = _last_values(_words(s, "extra_args"), _OTHER_GRAPH_FLAGS)
    if own_max_bs is not None or graphs is not None or other is not None:
        return argv  # the operator's own graphs
    # Only the measured sizes (docs/gpu-hosts.md): a batch between two levels is padded up to the next.
    return [*argv, graph_bs_flag, *map(str, levels)]


def sglang_argv(config: Config, s: Settings, slots: int) -> list[str]:
    """SGLang's server for one config (`slots` is the client's concurrency: SGLang batches itself, sized
    by `_sglang_capacity` from the sweep's levels), with the flags of the host's release (`version`)."""
    del slots  # SGLang sizes its batches at run time
    try:
        release = sglang_releases.release(_text(s, "version") or sglang_releases.LAST_RELEASE)
    except sglang_releases.ReleaseError as exc:
        raise SettingError(f"version: {exc}.") from None
    argv = [_text(s, "python", required=True), "-m", "sglang.launch_server"]
    argv += ["--model-path", _text(s, "model_path", required=True)]
    tp_size = _number(s, "tp_size", int, lambda n: n >= 1, "an integer >= 1", required=True)
    argv += ["--tp-size", str(tp_size), "--host", _text(s, "host", required=True), "--port", str(_port(s))]
    if config.speculative:
        argv += _sglang_spec(config, s)
    if config.overlap_schedule is False:
        argv.append("--disable-overlap-schedule")
    if config.adaptive:
        # The server switches step counts per batch size from the schedule, starting at config.steps;
        # without a schedule file, from SGLang's built-in one (DEFAULT_ADAPTIVE_CONFIG).
        argv.append("--speculative-adaptive")
        schedule = _text(s, "adaptive_config_path")
        argv += ["--speculative-adaptive-config", schedule] if schedule else []
    fraction = _number(s, "mem_fraction_static", float, lambda x: 0 < x < 1, "a number between 0 and 1")
    if fraction is not None:
        argv += ["--mem-fraction-static", repr(fraction)]
    backend = _text(s, "attention_backend")
    if backend is not None:
        argv += ["--attention-backend", backend]
    # The release's own spelling: from 0.5.20 --cuda-graph-max-bs is an ambiguous prefix (exit 2).
    max_bs = _number(s, "cuda_graph_max_bs_decode", int, lambda n: n >= 1, "an integer >= 1")
    if max_bs is not None:
        argv += [release.graph_max_bs_flag, str(max_bs)]
    argv += _sglang_capacity(s, release.graph_bs_flag, max_bs)
    if _flag(s, "enable_metrics"):
        argv.append("--enable-metrics")
    if _flag(s, "skip_warmup"):  # the suite's proving generation warms the server up (docs/gpu-hosts.md)
        argv.append("--skip-server-warmup")
    api_key = _text(s, "api_key")
    if api_key is not None:
        argv += ["--api-key", api_key]
    # Last, so an extra flag overrides one rendered above (argparse keeps the last value).
    return argv + _sglang_multinode(s) + _words(s, "extra_args")


def sglang_env(s: Settings) -> dict[str, Any]:
    """The user's env for every server (NCCL_*, SGLANG_RECORD_STEP_TIME=1, ...)."""
    return dict(s.get("env") or {})


# ---------------------------------------------------------------------------------------------
# The table the plan uses
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Engine:
    """How the plan renders one engine: whose variables, which of them, and the functions."""

    name: str
    role: str  # variables are `<role>_<setting>`, with the role's defaults
    settings: tuple[str, ...]
    argv: Callable[[Config, Settings, int], list[str]]
    base_env: Callable[[Settings], dict[str, Any]]
    version: Callable[[Settings], str | None]

    def server(self, s: Settings) -> dict[str, Any]:
        """Where the launched server listens and how long it may take to answer, for the host's tasks."""
        host, port = _text(s, "host", required=True), _port(s)
        timeout = _number(s, "health_timeout_s", float, lambda x: x > 0, "a number > 0", required=True)
        return {
            "engine": self.name,
            "version": self.version(s),
            "model": _text(s, "model_path", required=True),
            "host": host,
            "port": port,
            "url": f"http://{host}:{port}",
            "health_timeout_s": timeout,
            "api_key": s.get("api_key") or "",
            # The engine's own Python (SGLang's environment; None for llama.cpp): bench_serving runs there.
            "python": _text(s, "python"),
        }


_COMMON = ("model_path", "host", "port", "env", "extra_args", "health_timeout_s")
ENGINES = {
    "llama_cpp": Engine(
        "llama_cpp",
        "llama_server",
        (
            *_COMMON,
            "command",
            "ctx_size",
            "parallel",
            "metrics",
            "ngram_n_match",
            "ngram_n_min",
            "threads",
            "packages",
        ),
        llama_cpp_argv,
        llama_cpp_env,
        llama_cpp_version,
    ),
    "sglang": Engine(
        "sglang",
        "sglang_server",
        (
            *_COMMON,
            "python",
            "version",
            "draft_model_path",
            "speculative_algorithm",
            "tp_size",
            "mem_fraction_static",
            "attention_backend",
            "cuda_graph_max_bs_decode",
            "enable_metrics",
            "skip_warmup",
            "api_key",
            "nnodes",
            "node_rank",
            "dist_init_addr",
        ),
        sglang_argv,
        sglang_env,
        lambda s: None,  # the host reports it: `import sglang` under sglang_server_python, in preflight
    ),
}
