"""The benchmark client's command line on a host: specsweep's own client or SGLang's bench_serving.

Both take the same measurement options (roles/benchmark/files/specsweep_bench.py
add_measurement_options), so one argv builder serves the benchmark role's two clients. A sweep's
plan builds each host's (`host_argv`, in plan.json); the role builds its own from its variables
where it runs alone (deploy's gate). Either way the role adds where one launch keeps its output
(`launch_argv`), as server_process picks the server's log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

CLIENTS = ("specsweep", "sglang")


# The benchmark role's host variables the plan resolves per host (`benchmark_<name>`), with what its
# defaults give a host without ansible_python_interpreter (tests/unit/test_sweep_client.py compares).
ROLE_DEFAULTS: dict[str, Any] = {
    "python": "/usr/bin/python3", "work_dir": "/var/tmp/specsweep/bench", "prompt_set": "prompts/code.jsonl",
    "request_timeout_s": 300, "sglang_extra_args": [],
}  # fmt: skip
# The sweep settings the client's argv carries, by their -e names (analysis.sweep.request).
SWEEP_SETTINGS = (
    "max_tokens", "warmup", "repeats", "concurrency", "bench_requests", "bench_duration_s", "request_rate",
    "bench_ci_pct", "bench_min_requests", "bench_level_budget_s", "seed",
)  # fmt: skip
# How each level is driven: the settings' client options (a value unset is left out).
LOAD_OPTIONS = {"bench_requests": "--requests", "bench_duration_s": "--duration-s",
                "request_rate": "--request-rate", "seed": "--seed"}  # fmt: skip


def client_argv(s: Mapping[str, Any]) -> list[str]:
    """argv of every measurement on a host but where it keeps its output (`launch_argv` adds that);
    `s`: the benchmark role's variables by short name, the sweep's settings by their own."""
    client = s["client"]
    if client not in CLIENTS:
        raise ValueError(f"benchmark_client: {client!r} is not one of: {', '.join(CLIENTS)}")
    work = str(s["work_dir"]).rstrip("/")
    if client == "specsweep":
        argv = [str(s["python"]), f"{work}/specsweep_bench.py", f"--engine={s['engine']}"]
    else:
        argv = [
            str(s["python"]), f"{work}/specsweep_bench_serving.py", f"--sglang-python={s['sglang_python']}",
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
        "--api-key-env=SPECSWEEP_API_KEY",
        *(f"--concurrency={c}" for c in s["concurrency"]),
        *(stop_options(s) if client == "specsweep" else []),
        *load_options(s),
    ]


def host_argv(
    role: Mapping[str, Any],
    server: Mapping[str, Any],
    settings: Mapping[str, Any],
    records: str,
    levels: Mapping[str, Any],
) -> list[str]:
    """The argv the plan gives a host: its benchmark role's variables (`role`, by short name), its
    server (engine, url, python), the sweep's settings, the workloads' records file ("": the
    role's prompt set) and how the host's levels stop (`levels`: analysis.sweep.levelsize, whose
    settings replace the sweep's)."""
    return client_argv({
        **role,
        "engine": server["engine"],
        "url": server["url"],
        "sglang_python": server["python"],
        "prompt_set": records or role["prompt_set"],
        **{name: settings[name] for name in SWEEP_SETTINGS},
        **levels,
    })  # fmt: skip


def launch_argv(launch: Mapping[str, Any]) -> list[str]:
    """One launch's argv: the host's (`argv`), the levels it measures where not every one (`levels`,
    level_name's) and where it keeps the client's document (`output`) and, for bench_serving
    (`client` sglang), its own JSONL (`sglang_jsonl`)."""
    only = [f"--only={level}" for level in launch.get("levels") or []]
    jsonl = [f"--jsonl={launch['sglang_jsonl']}"] if launch["client"] == "sglang" else []
    return [*launch["argv"], *only, f"--output={launch['output']}", *jsonl]


def level_name(workload: str | None, concurrency: float) -> str:
    """A level as the client's --only takes it: C of a plain prompt set, WORKLOAD:C of a named
    workload (the client's parse_level reads it; tests/unit/test_sweep_client.py checks both)."""
    return f"{workload}:{concurrency:g}" if workload else f"{concurrency:g}"


def level_of(name: str) -> tuple[str | None, float]:
    """(workload, concurrency) of a level_name, as a fact's benchmark.only records it."""
    workload, _, concurrency = name.rpartition(":")
    return workload or None, float(concurrency)


# When a level stops early (specsweep's own client; bench_serving sends each level's count); the
# launch's cost and spread are the plan's, per host (analysis.sweep.levelsize).
STOP_OPTIONS = {"bench_ci_pct": "--ci-pct", "bench_min_requests": "--min-requests",
                "bench_level_budget_s": "--level-budget-s", "bench_launch_cost_s": "--launch-cost-s",
                "bench_launch_cv_pct": "--launch-cv-pct"}  # fmt: skip


def stop_options(s: Mapping[str, Any]) -> list[str]:
    """The stopping options that are set."""
    return [f"{flag}={s[key]}" for key, flag in STOP_OPTIONS.items() if s.get(key) not in (None, "")]


def load_options(s: Mapping[str, Any]) -> list[str]:
    """The load options that are set (unset: None, or '' as a template renders it)."""
    return [f"{flag}={s[key]}" for key, flag in LOAD_OPTIONS.items() if s.get(key) not in (None, "")]


def install_files(install: Mapping[str, Any]) -> list[dict[str, str]]:
    """The benchmark role's `files` as specsweep_files installs them: each at its host path under
    `work_dir`, with its mode and its controller text (`texts`, in the files' order)."""
    texts: Sequence[str] = install["texts"]
    return [
        {"dest": f"{install['work_dir']}/{f['dest']}", "mode": f["mode"], "content": text}
        for f, text in zip(install["files"], texts, strict=True)
    ]
