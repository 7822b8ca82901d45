"""Build schema-valid facts and sweep folders for unit tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from analysis.facts.schema import (
    BenchmarkSettings,
    Config,
    Engine,
    Fact,
    Failure,
    HostFacts,
    Launch,
    RequestResult,
    Run,
    SpecStats,
    Timings,
    to_dict,
)


def config(steps: int | None = None, env_profile: str = "default") -> Config:
    """A baseline (steps None) or an EAGLE-3 config drafting steps + 1 tokens."""
    suffix = "" if env_profile == "default" else f"+{env_profile}"
    if steps is None:
        return Config(id=f"baseline{suffix}", speculative=False, env_profile=env_profile)
    return Config(
        id=f"s{steps}{suffix}",
        speculative=True,
        algorithm="EAGLE3",
        steps=steps,
        topk=1,
        draft_tokens=steps + 1,
        env_profile=env_profile,
    )


def grid_config(steps: int, topk: int, draft_tokens: int) -> Config:
    """An EAGLE-3 grid point named as the sweep names it (s<steps>-k<topk>-d<draft>)."""
    return Config(
        id=f"s{steps}-k{topk}-d{draft_tokens}",
        speculative=True,
        algorithm="EAGLE3",
        steps=steps,
        topk=topk,
        draft_tokens=draft_tokens,
    )


def run(
    tps: list[float],
    *,
    repeat: int = 0,
    concurrency: int = 1,
    accept_length: float | None = None,
    error: str | None = None,
    ttft_s: float = 0.5,
    texts: list[str] | None = None,
) -> Run:
    """One run whose requests decoded at the given tok/s (the last one errors if asked)."""
    requests = [
        RequestResult(
            prompt_id=f"p{i}",
            output_tokens=128,
            ttft_s=ttft_s,
            e2e_s=ttft_s + 128 / t,
            decode_tps=t,
            itl_s=[1 / t] * 3,
            text=texts[i] if texts else f"answer {i}",
        )
        for i, t in enumerate(tps)
    ]
    if error:
        requests.append(
            RequestResult("p-err", 0, 0.0, 0.0, None, error=error)  # what a dropped stream leaves
        )
    spec = SpecStats(accept_length=accept_length)
    return Run(
        repeat=repeat,
        concurrency=concurrency,
        duration_s=10.0,
        requests=requests,
        spec=spec,
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
        benchmark=BenchmarkSettings("specsweep-bench/1", "seed", "0" * 64, 128, 1, 3, [1]),
        runs=runs,
        failure=failure,
        server_info=server_info or {},
    )


def crash(cause: str = "crash_during_load") -> Failure:
    """A failure as the launch role records it."""
    return Failure(phase="wait_for_health", cause=cause, message="server exited with 1")


def write_sweep(root: Path, facts: list[Fact]) -> Path:
    """Write facts as `<root>/<sweep_id>/<host>/<config_id>.json`; returns the sweep folder."""
    for f in facts:
        path = root / f.sweep_id / f.host / f"{f.config.id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(to_dict(f), indent=2), encoding="utf-8")
    return root / facts[0].sweep_id
