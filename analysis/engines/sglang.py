"""SGLang (`python -m sglang.launch_server`), GPU, the production engine; never installed by specsweep.

Flags are spelt for the host's release (analysis.engines.sglang_releases) and checked against SGLang
0.5.23's own argument definitions (tests/unit/fixtures/sglang_0.5.23_flags.txt); the rules are read
from sglang/srt/arg_groups/speculative_hook.py, sglang/srt/speculative/spec_info.py and
sglang/srt/speculative/adaptive_spec_params.py. Preflight has the host's own SGLang parse and
resolve every planned argv (roles/sglang_server/files/specsweep_sglang_check.py).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from analysis.engines import sglang_adaptive, sglang_releases
from analysis.engines.base import (
    COMMON_SETTINGS,
    Adaptive,
    Engine,
    Point,
    SettingError,
    Settings,
    flag,
    number,
    port_of,
    text,
    user_env,
    words,
)
from analysis.redact import redact_argv

NAME = "sglang"
VERSION_CHECKED = "0.5.23"
# Every name SpeculativeAlgorithm.from_string accepts in SGLang 0.5.23 (besides plugin-registered
# ones): the enum members (speculative/spec_info.py, NONE left out) plus the NEXTN alias.
KNOWN_ALGORITHMS = frozenset(
    {"DFLASH", "DSPARK", "EAGLE", "EAGLE3", "FROZEN_KV_MTP", "NEXTN", "NGRAM", "STANDALONE", "UNO"}
)
# The algorithms grid points describe with (steps, topk, draft_tokens). DFLASH/DSPARK force
# steps=topk=1 and size the draft by block size, UNO needs a LoRA, FROZEN_KV_MTP is what SGLang
# promotes NEXTN/EAGLE to for Gemma4 drafts.
ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
# SGLang does not reject these without a draft path: the draft worker silently falls back to the
# target checkpoint (configs/model_config.py `model_path or cfg.model_path`), which for
# EAGLE/EAGLE3 fails late or drafts nonsense, and for STANDALONE drafts with the target itself.
DRAFT_REQUIRED = frozenset({"EAGLE", "EAGLE3", "STANDALONE"})


def problems(config: Point, algorithm: str | None = None) -> list[str]:
    """Why SGLang cannot run a config (`algorithm`: the host's, for a config that names none)."""
    name = config.algorithm or algorithm
    if not config.speculative or name is None:
        return []  # the host's sglang_server_speculative_algorithm, checked when rendered
    # The exact spelling: SGLang would upper-case it, but facts and tables group configs by it
    # ("eagle3" beside "EAGLE3"); the host's default is upper-cased when rendered.
    if name not in KNOWN_ALGORITHMS:
        return [f"algorithm: {name!r} is not known to sglang (one of: {', '.join(ALGORITHMS)})"]
    if name not in ALGORITHMS:
        return [
            f"algorithm: {name} is not described by steps/topk/draft_tokens; "
            f"specsweep sweeps {', '.join(ALGORITHMS)}"
        ]
    if name == "NGRAM" and config.topk not in (None, 1):
        # SGLang overwrites topk with --speculative-ngram-max-bfs-breadth (default 10).
        return [
            "topk: NGRAM ignores it (SGLang sets topk to --speculative-ngram-max-bfs-breadth); leave it unset"
        ]
    return []


def _spec(config: Point, s: Settings) -> list[str]:
    """The --speculative-* part of the argv."""
    # A config without an algorithm takes the host's (sglang_server_speculative_algorithm).
    name = (config.algorithm or text(s, "speculative_algorithm") or "").upper()
    if not name:
        raise SettingError("speculative_algorithm: required when a config names no algorithm.")
    refused = problems(config, name)
    if refused and config.algorithm is None:
        raise SettingError(f"speculative_algorithm: {refused[0].split(': ', 1)[1]}")
    argv = ["--speculative-algorithm", name]
    steps, topk, draft = config.steps, config.topk, config.draft_tokens
    if name == "NGRAM":
        # NGRAM drafts from a suffix trie of the context: the host's draft model is not passed, so
        # one host can sweep NGRAM beside EAGLE3. Steps are passed too: otherwise SGLang derives
        # draft_tokens // bfs-breadth, which is 0 for short drafts.
        tokens = steps + 1 if draft is None else draft
        return [*argv, "--speculative-num-steps", str(steps), "--speculative-num-draft-tokens", str(tokens)]
    draft_path = text(s, "draft_model_path")
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


def _multinode(s: Settings) -> list[str]:
    """--nnodes/--node-rank/--dist-init-addr, only when the server spans several nodes."""
    nnodes = number(s, "nnodes", int, lambda n: n >= 1, "an integer >= 1")
    node_rank = number(s, "node_rank", int, lambda n: n >= 0, "an integer >= 0")
    addr = text(s, "dist_init_addr")
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


def _last_values(argv: list[str], flags: tuple[str, ...]) -> list[str] | None:
    """The value words of the last of `flags` in `argv` (argparse keeps the last; `--f=v` too),
    None when none is there."""
    found = None
    for i, word in enumerate(argv):
        name, eq, value = word.partition("=")
        if name in flags:
            rest = argv[i + 1 :]
            found = [value] if eq else list(itertools.takewhile(lambda w: not w.startswith("-"), rest))
    return found


def _own_limit(s: Settings, flags: tuple[str, ...]) -> int | None:
    """The largest value the operator gave one of `flags` in extra_args (None: not given)."""
    values = _last_values(words(s, "extra_args"), flags)
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


def _capacity(s: Settings, graph_bs_flag: str, own_max_bs: int | None) -> list[str]:
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
    other = _last_values(words(s, "extra_args"), _OTHER_GRAPH_FLAGS)
    if own_max_bs is not None or graphs is not None or other is not None:
        return argv  # the operator's own graphs
    # Only the measured sizes (docs/gpu-hosts.md): a batch between two levels is padded up to the next.
    return [*argv, graph_bs_flag, *map(str, levels)]


def argv(config: Point, s: Settings, slots: int) -> list[str]:
    """SGLang's server for one config (`slots` is the client's concurrency: SGLang batches itself, sized
    by `_capacity` from the sweep's levels), with the flags of the host's release (`version`)."""
    del slots  # SGLang sizes its batches at run time
    try:
        release = sglang_releases.release(text(s, "version") or sglang_releases.LAST_RELEASE)
    except sglang_releases.ReleaseError as exc:
        raise SettingError(f"version: {exc}.") from None
    out = [text(s, "python", required=True), "-m", "sglang.launch_server"]
    out += ["--model-path", text(s, "model_path", required=True)]
    tp_size = number(s, "tp_size", int, lambda n: n >= 1, "an integer >= 1", required=True)
    out += ["--tp-size", str(tp_size), "--host", text(s, "host", required=True), "--port", str(port_of(s))]
    if config.speculative:
        out += _spec(config, s)
    if config.overlap_schedule is False:
        out.append("--disable-overlap-schedule")
    if config.adaptive:
        # The server switches step counts per batch size from the schedule, starting at config.steps;
        # without a schedule file, from SGLang's built-in one (DEFAULT_ADAPTIVE_CONFIG).
        out.append("--speculative-adaptive")
        schedule = text(s, "adaptive_config_path")
        out += ["--speculative-adaptive-config", schedule] if schedule else []
    fraction = number(s, "mem_fraction_static", float, lambda x: 0 < x < 1, "a number between 0 and 1")
    if fraction is not None:
        out += ["--mem-fraction-static", repr(fraction)]
    backend = text(s, "attention_backend")
    if backend is not None:
        out += ["--attention-backend", backend]
    # The release's own spelling: from 0.5.20 --cuda-graph-max-bs is an ambiguous prefix (exit 2).
    max_bs = number(s, "cuda_graph_max_bs_decode", int, lambda n: n >= 1, "an integer >= 1")
    if max_bs is not None:
        out += [release.graph_max_bs_flag, str(max_bs)]
    out += _capacity(s, release.graph_bs_flag, max_bs)
    if flag(s, "enable_metrics"):
        out.append("--enable-metrics")
    if flag(s, "skip_warmup"):  # the suite's proving generation warms the server up (docs/gpu-hosts.md)
        out.append("--skip-server-warmup")
    api_key = text(s, "api_key")
    if api_key is not None:
        out += ["--api-key", api_key]
    extra = words(s, "extra_args")
    if "--enable-metrics-for-all-schedulers" in extra:
        # Every attention-TP rank's scheduler then exports its gauges, not rank 0's alone (0.5.23
        # managers/scheduler.py, metrics_enabled), and the server-load probe sums the series.
        raise SettingError(
            "extra_args: --enable-metrics-for-all-schedulers has every TP rank report the same requests, "
            "so the server's running and queued figures would count each request tp_size times; drop it "
            "(--enable-metrics, set by sglang_server_enable_metrics, is what the sweep reads)."
        )
    # Last, so an extra flag overrides one rendered above (argparse keeps the last value).
    return out + _multinode(s) + extra


# ---------------------------------------------------------------------------------------------
# Preflight (roles/sglang_server): the host's own SGLang parses and resolves every planned argv
# ---------------------------------------------------------------------------------------------


def check_input(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
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


def found(checked: Mapping[str, Any], on: Mapping[str, Any]) -> dict[str, Any]:
    """The version, git SHA and problems of the host's SGLang check (`checked`: the registered
    command; skipped when the host had problems already, or nothing to check), for `on` (host,
    the version the plan was spelt for)."""
    if checked.get("skipped"):
        return {"version": None, "git_sha": None, "problems": []}
    result = json.loads(checked["stdout"])
    refused = check_problems(result, str(on["host"]), on.get("version"))
    return {"version": result.get("version"), "git_sha": result.get("git_sha"), "problems": refused}


def check_problems(result: Mapping[str, Any], host: str, version: str | None) -> list[str]:
    """Why the host's own SGLang refuses the plan: it cannot be imported, it is another release than
    the argv was spelt for (`version`, sglang_server_version), or it refuses a config's argv (naming
    the config, the flag and SGLang's own message)."""
    if result.get("error"):
        return [f"sglang_server_python: {host}: SGLang's parser cannot be imported: {result['error']}"]
    has = str(result.get("version"))
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
        for config_id, why in (result.get("results") or {}).items()
        if why
    ]


ENGINE = Engine(
    name=NAME,
    checkpoints=("model_path", "draft_model_path"),
    role="sglang_server",
    settings=(
        *COMMON_SETTINGS,
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
    argv=argv,
    base_env=user_env,  # NCCL_*, SGLANG_RECORD_STEP_TIME=1, ...
    version=lambda s: None,  # the host reports it: `import sglang` under sglang_server_python, in preflight
    problems=problems,
    algorithms=ALGORITHMS,
    axes=frozenset({"topk", "draft_tokens", "overlap_schedule"}),
    clients=("specsweep", "sglang"),  # sglang: SGLang's own bench_serving
    check_input=check_input,
    found=found,
    adaptive=Adaptive(
        label="SGLang",
        flag="SGLang's --speculative-adaptive",
        problems=sglang_adaptive.problems,
        schedule=sglang_adaptive.host_schedule,
        start=sglang_adaptive.start_steps,
        notes=sglang_adaptive.notes,
    ),
    multinode=True,
    # the seed case's 88.8 tok/s baseline
    assumed_tps=90.0,
)
