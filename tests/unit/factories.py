"""Build schema-valid facts, host plans and sweep folders for unit tests."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import msgspec

from analysis.facts.schema import (
    SCHEMA_VERSION,
    BenchmarkSettings,
    Engine,
    Fact,
    Failure,
    HostFacts,
    Interference,
    Launch,
    RequestResult,
    Run,
    SpecStats,
    Timings,
    to_dict,
)
from analysis.sweep import request
from analysis.sweep.config import Config, make
from analysis.sweep.hostplan import Entry, Estimate, HostPlan, Server, Settings, Sweep, dump, load


def config(steps: int | None = None, env_profile: str = "default") -> Config:
    """A baseline (steps None) or an EAGLE-3 config of that many steps, no tree (its id: s<steps>)."""
    return make(steps, algorithm="EAGLE3", env_profile=env_profile)


def grid_config(steps: int, topk: int, draft_tokens: int) -> Config:
    """An EAGLE-3 grid point named as the sweep names it (s<steps>-k<topk>-d<draft>)."""
    return make(steps, topk, draft_tokens, "EAGLE3")


def run(
    tps: list[float],
    *,
    repeat: int = 0,
    concurrency: int = 1,
    accept_length: float | None = None,
    error: str | None = None,
    ttft_s: float = 0.5,
    texts: list[str] | None = None,
    interfered: bool = False,
    workload: str | None = None,
    duration_s: float | None = None,
) -> Run:
    """One run whose requests decoded at the given tok/s (the last one errors if asked).

    Its window (duration_s) defaults to the tokens at the median rate, so that every objective's
    figure (throughput, per-user, decode tok/s) ranks the configs as `tps` does; a test that has
    them disagree gives the durations.
    """
    requests = [
        RequestResult(
            prompt_id=f"p{i}",
            output_tokens=128,
            ttft_s=ttft_s,
            e2e_s=ttft_s + 127 / t,  # 127 tokens after the first at t tok/s: TPOT 1 / t
            decode_tps=t,
            itl_s=[1 / t] * 3,
            text=texts[i] if texts else f"answer {i}",
        )
        for i, t in enumerate(tps)
    ]
    if error:
        # What a dropped stream leaves.
        requests.append(
            RequestResult(
                prompt_id="p-err", output_tokens=0, ttft_s=0.0, e2e_s=0.0, decode_tps=None, error=error
            )
        )
    spec = SpecStats(accept_length=accept_length)
    window = 128 * len(tps) / statistics.median(tps) if tps else 10.0
    return Run(
        repeat=repeat,
        concurrency=concurrency,
        duration_s=window if duration_s is None else duration_s,
        requests=requests,
        spec=spec,
        interference=Interference(load_avg_1m=3.0, flagged=True, reason="load 3.0") if interfered else None,
        workload=workload,
    )


def fact(
    cfg: Config,
    runs: list[Run],
    *,
    sweep_id: str = "sweep-1",
    host: str = "gpu-a",
    failure: Failure | None = None,
    engine: Engine | None = None,
    started_at: float = 1.0,
    server_info: dict[str, Any] | None = None,
    launch_index: int = 1,
) -> Fact:
    """A fact for one config; status follows from whether a failure is given."""
    return Fact(
        sweep_id=sweep_id,
        host=host,
        config=cfg,
        engine=engine or Engine(name="sglang", model="Kimi-K2.5", launcher="nohup", version="0.5.0"),
        launch=Launch(argv=["python", "-m", "sglang.launch_server"], env={}),
        host_facts=HostFacts(hostname=host),
        timings=Timings(started_at=started_at, finished_at=started_at + 1.0),
        status="failed" if failure else "ok",
        benchmark=BenchmarkSettings(
            client="specsweep-bench/1",
            prompt_set="seed",
            prompt_sha256="0" * 64,
            max_tokens=128,
            warmup=1,
            repeats=3,
            concurrency=[1],
        ),
        runs=runs,
        failure=failure,
        server_info=server_info or {},
        schema_version=SCHEMA_VERSION,
        launch_index=launch_index,
    )


def relaunched(facts: list[Fact]) -> list[Fact]:
    """The facts and each baseline's second launch, as the sweep's end measures it (identical here):
    the sweep has then measured its launch spread, so verdicts rest on it, not on the launch prior."""
    again = [msgspec.structs.replace(f, launch_index=2) for f in facts if not f.config.speculative]
    return [*facts, *again]


def crash(cause: str = "crash_during_load") -> Failure:
    """A failure as the launch role records it."""
    return Failure(phase="wait_for_health", cause=cause, message="server exited with 1")


def write_sweep(root: Path, facts: list[Fact]) -> Path:
    """Write facts as `<root>/<sweep_id>/<host>/<config_id>.json` (`.launch<k>.json` for a config's
    k-th launch, k >= 2, as the sweep names it); returns the sweep folder."""
    for f in facts:
        launch = f".launch{f.launch_index}" if f.launch_index > 1 else ""
        path = root / f.sweep_id / f.host / f"{f.config.id}{launch}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(to_dict(f), indent=2), encoding="utf-8")
    return root / facts[0].sweep_id


def server(**changes: Any) -> Server:
    """A llama.cpp server on localhost:8080, as analysis.engines.llama_cpp renders it."""
    base = Server(engine="llama_cpp", version="xllamacpp==2026.10.11549", model="/m.gguf",
                  host="127.0.0.1", port=8080, url="http://127.0.0.1:8080", health_timeout_s=120.0,
                  api_key="", python=None)  # fmt: skip
    return msgspec.structs.replace(base, **changes)


def entry(
    cfg: Config, argv: list[str] | None = None, env: dict[str, str] | None = None, searched: bool = False
) -> Entry:
    """One config's launch in a host plan (its argv names the config unless given)."""
    return Entry(config=cfg, argv=argv or ["llama-server", "--id", cfg.id], env=env or {}, searched=searched)


def host_plan(entries: list[Entry] | None = None, **changes: Any) -> dict[str, Any]:
    """A lone llama.cpp host's plan as Ansible receives it (specsweep_host), checked on the way out."""
    base = HostPlan(engine="llama_cpp", role="llama_server", server=server(), benchmark=None,
                    entries=entries or [],
                    order=[], closing=[], problems=[], follows=None, followed_by=[],
                    run_dir="/var/tmp/specsweep", lock_path="/var/tmp/specsweep/sweep.lock",
                    adaptive_config=None)  # fmt: skip
    return dump(msgspec.structs.replace(base, **changes))


def plan_sweep(sweep_id: str, **settings: Any) -> dict[str, Any]:
    """A plan's sweep part as plan.build writes it: every setting its default but those given."""
    chosen = load(Settings, {**request.read({}).values, **settings})
    estimate = Estimate(configs=0, launches_per_host=0, seconds=None, text="")
    return dump(Sweep(id=sweep_id, dir=f"results/{sweep_id}", run_id="run-1", run_started_at=0.0,
                      git_rev=None, repo="/repo", hosts=[], settings=chosen, configs=[], warnings=[],
                      workloads=None, estimate=estimate))  # fmt: skip
