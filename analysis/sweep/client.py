"""The benchmark client's command line on a host: specsweep's own client or SGLang's bench_serving.

Both take the same measurement options (roles/benchmark/files/specsweep_bench.py
add_measurement_options), so one argv builder serves the benchmark role's two clients.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from analysis.sweep.preflight import file_digests

CLIENTS = ("specsweep", "sglang")


def client_argv(s: Mapping[str, Any]) -> list[str]:
    """argv of one measurement; `s` holds the benchmark role's variables by short name."""
    client = s["client"]
    if client not in CLIENTS:
        raise ValueError(f"benchmark_client: {client!r} is not one of: {', '.join(CLIENTS)}")
    work = str(s["work_dir"]).rstrip("/")
    if client == "specsweep":
        argv = [str(s["python"]), f"{work}/specsweep_bench.py", f"--engine={s['engine']}"]
    else:
        argv = [
            str(s["python"]), f"{work}/specsweep_bench_serving.py",
            f"--sglang-python={s['sglang_python']}", f"--jsonl={s['sglang_jsonl']}",
            *(f"--extra-arg={a}" for a in s.get("sglang_extra_args") or []),
        ]  # fmt: skip
    prompts = str(s["prompt_set"]).rsplit("/", 1)[-1]
    return [
        *argv,
        f"--url={s['url']}",
        f"--prompts={work}/{prompts}",
        f"--max-tokens={s['max_tokens']}",
        f"--warmup={s['warmup']}",
        f"--repeats={s['repeats']}",
        f"--timeout-s={s['request_timeout_s']}",
        f"--output={s['output']}",
        "--api-key-env=SPECSWEEP_API_KEY",
        *(f"--concurrency={c}" for c in s["concurrency"]),
        *(stop_options(s) if client == "specsweep" else []),
        *load_options(s),
    ]


# How each level is driven (the sweep's bench_requests, bench_duration_s, request_rate, seed).
LOAD_OPTIONS = {"requests": "--requests", "duration_s": "--duration-s", "request_rate": "--request-rate",
                "seed": "--seed"}  # fmt: skip


# When a level stops early (specsweep's own client; bench_serving sends each level's count).
STOP_OPTIONS = {"ci_pct": "--ci-pct", "min_requests": "--min-requests", "level_budget_s": "--level-budget-s"}


def stop_options(s: Mapping[str, Any]) -> list[str]:
    """The stopping options that are set."""
    return [f"{flag}={s[key]}" for key, flag in STOP_OPTIONS.items() if s.get(key) not in (None, "")]


def load_options(s: Mapping[str, Any]) -> list[str]:
    """The load options that are set (unset: None, or '' as a template renders it)."""
    return [f"{flag}={s[key]}" for key, flag in LOAD_OPTIONS.items() if s.get(key) not in (None, "")]


def installed_files(install: Mapping[str, Any]) -> dict[str, str]:
    """Each of the benchmark role's `files` at its host path under `work_dir` with the sha1 of its
    controller text (`texts`, in the files' order): what specsweep_host_facts compares, so a host
    that has them all copies nothing."""
    texts: Sequence[str] = install["texts"]
    return file_digests(
        {f"{install['work_dir']}/{f['dest']}": text for f, text in zip(install["files"], texts, strict=True)}
    )
