"""What a real H200 run showed (issue 25, item 8), on its captured outputs.

fixtures/h200_run/ holds what came back from the GPU recipe (shared/gpu-run/): a CUDA llama.cpp
`llama-server` built from the xllamacpp==2026.10.11549 sdist, driver 580.159.04, CUDA 13.0.
- llama_server_cuda_oom_mid_benchmark.log: the whole server log of a config whose server died with
  `CUDA error: out of memory` after 3 of 4 requests (the recorded fact said `server_exited (signal 6)`);
- llama_server_cuda_oom_at_load.tail.log: the log tail of a server that could not allocate its weights;
- nvidia_smi_topo_m.txt: `nvidia-smi topo -m` as that run's preflight.json recorded it (ANSI codes kept).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from module_runner import module_utils, run_module
from plugin_loader import load_plugin

from analysis.facts import record

logs = module_utils("specsweep_logs")
gpu = load_plugin("plugins/module_utils/specsweep_gpu.py")
build = load_plugin("plugins/module_utils/specsweep_build.py")
RUN = Path(__file__).resolve().parent / "fixtures" / "h200_run"
OOM_LOG = RUN / "llama_server_cuda_oom_mid_benchmark.log"
OOM_LINE = "0.03.280.917 E CUDA error: out of memory"


def lines(name: str) -> list[str]:
    return (RUN / name).read_text(encoding="utf-8").splitlines()


# --- the log is classified in every phase -----------------------------------------------------


def test_a_cuda_oom_mid_benchmark_is_out_of_memory_and_the_healthy_part_of_that_log_names_nothing() -> None:
    log = lines(OOM_LOG.name)
    assert logs.classify_failure(log[-40:]) == ("out_of_memory", OOM_LINE)
    # Everything the server wrote while it loaded and served (no false cause from a healthy log).
    death = next(i for i, line in enumerate(log) if "CUDA error" in line)
    assert logs.classify_failure(log[:death])[0] == "unknown"


def test_a_cuda_oom_at_load_is_out_of_memory() -> None:
    cause, evidence = logs.classify_failure(lines("llama_server_cuda_oom_at_load.tail.log"))
    assert cause == "out_of_memory"
    assert "failed to allocate CUDA0 buffer" in evidence


@pytest.fixture
def aborting_server(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A stand-in launched by specsweep_server that writes the captured log up to its first line, then
    the rest when tmp_path/oom exists, and aborts (SIGABRT, as ggml's CUDA error handler does)."""
    code = (
        "import os, sys, time\n"
        "log = open(sys.argv[1]).read().splitlines(True)\n"
        "sys.stdout.write(log[0]); sys.stdout.flush()\n"
        "while not os.path.exists(sys.argv[2]):\n"
        "    time.sleep(0.05)\n"
        "sys.stdout.writelines(log[1:]); sys.stdout.flush()\n"
        "os.abort()\n"
    )
    record_ = run_module("specsweep_server", {
        "state": "started", "argv": [sys.executable, "-c", code, str(OOM_LOG), str(tmp_path / "oom")],
        "pidfile": str(tmp_path / "server.pid"), "log_path": str(tmp_path / "s1.log"), "port": 1,
    })  # fmt: skip
    assert record_["changed"] is True, record_
    yield record_
    for pid in (record_["pid"], record_["server_pid"]):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


def test_a_server_that_dies_of_cuda_oom_during_the_benchmark_fails_the_config_as_out_of_memory(
    tmp_path: Path, aborting_server: dict[str, Any]
) -> None:
    client = "import time\nprint('repeat 1/3', flush=True)\ntime.sleep(600)\n"
    args = {"argv": [sys.executable, "-c", client], "path": str(tmp_path / "s1.bench.json"),
            "token": "run-1/s1", "server_pidfile": str(tmp_path / "server.pid"),
            "server_log": str(tmp_path / "s1.log")}  # fmt: skip
    first = run_module("specsweep_job", {**args, "slice_s": 1})
    assert first["done"] is False, first
    (tmp_path / "oom").touch()
    result = run_module("specsweep_job", {**args, "slice_s": 30})
    assert (result.get("failed"), result.get("cause")) == (True, "out_of_memory"), result
    assert result["msg"] == f"server exited (signal 6: SIGABRT) during benchmark: out_of_memory: {OOM_LINE}"
    assert result["exit"]["signal"] == 6 and OOM_LINE in result["log_tail"]
    # The fact says so too: the server's death, not the client's refused connections.
    failure = {"phase": "benchmark", "result": {**result, "stdout": '{"error": "every request failed"}'}}
    fact = record.build_fact(fact_payload(failure))
    assert fact.failure is not None
    assert (fact.failure.cause, fact.failure.message) == ("out_of_memory", result["msg"])


def fact_payload(failure: dict[str, Any]) -> dict[str, Any]:
    """The fact writer's payload of a failed benchmark on the GPU host."""
    return {
        "sweep_id": "h200-oom", "host": "localhost",
        "config": {"id": "baseline", "speculative": False, "env_profile": "default"},
        "engine": {"name": "llama_cpp", "model": "/opt/specsweep/models/gemma-3-270m-q4_k_m.gguf",
                   "launcher": "nohup"},
        "launch": {"argv": ["/opt/b/llama-server"], "env": {}, "log_path": None},
        "host_facts": {"hostname": "vm"},
        "timings": {"started_at": 1.0, "ready_at": 2.0, "finished_at": 3.0, "load_s": 1.0},
        "benchmark_output": None, "failure": failure,
    }  # fmt: skip


# --- the GPU topology without nvidia-smi's escape codes -------------------------------------------


def test_the_topology_the_h200_run_recorded_loses_its_ansi_codes_and_nothing_else() -> None:
    raw = (RUN / "nvidia_smi_topo_m.txt").read_text(encoding="utf-8")
    assert "\x1b[4m" in raw  # what the run recorded
    plain = gpu.plain_text(raw)
    assert "\x1b" not in plain
    assert plain.splitlines()[:2] == [
        "\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID",
        "GPU0\t X \t0-15\t0\t\tN/A",
    ]
    assert plain.replace("\t", "").replace(" ", "") == raw.replace("\x1b[4m", "").replace(
        "\x1b[0m", ""
    ).replace("\t", "").replace(" ", "")


# --- the engine's own build info ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "build_info"),
    [
        # llama.cpp's common/build-info.cpp.in in the xllamacpp 2026.10.11549 sdist the GPU run built
        # (no git: build 0, commit unknown; CMAKE_C_COMPILER_ID/VERSION; CMAKE_SYSTEM_NAME/PROCESSOR),
        # after the CUDA backend's device lines.
        pytest.param(
            "ggml_cuda_init: found 1 CUDA devices:\n"
            "  Device 0: NVIDIA H200, compute capability 9.0, VMM: no\n"
            "version: 0.6.0-dev (build 0, commit unknown)\nbuilt with GNU 13.3.0 for Linux x86_64\n",
            "llama.cpp 0.6.0-dev b0-unknown (built with GNU 13.3.0 for Linux x86_64)",
            id="source-build-without-git",
        ),
        pytest.param(
            "version: 0.6.0 (build 7212, commit 4a1b2c3)\nbuilt with Clang 18.1.3 for Linux x86_64\n",
            "llama.cpp 0.6.0 b7212-4a1b2c3 (built with Clang 18.1.3 for Linux x86_64)",
            id="release",
        ),
        # Releases before the version string: "version: %d (%s)".
        pytest.param(
            "version: 6123 (a1b2c3d)\nbuilt with cc (Ubuntu 13.3.0) 13.3.0 for x86_64-linux-gnu\n",
            "llama.cpp b6123-a1b2c3d (built with cc (Ubuntu 13.3.0) 13.3.0 for x86_64-linux-gnu)",
            id="older-release",
        ),
        pytest.param("error: unknown argument: --version\n", None, id="no-version"),
    ],
)
def test_llama_server_version_output_becomes_its_build_info(output: str, build_info: str | None) -> None:
    assert build.llama_build(output) == build_info


def test_host_facts_records_a_binarys_own_build_info(tmp_path: Path) -> None:
    exe = tmp_path / "llama-server"
    exe.write_text(
        '#!/bin/sh\n[ "$1" = --version ] || exit 2\n'
        "echo 'version: 0.6.0-dev (build 0, commit unknown)' >&2\n"
        "echo 'built with GNU 13.3.0 for Linux x86_64' >&2\n"
    )
    exe.chmod(0o755)
    found = run_module("specsweep_host_facts", {"hardware": False, "version_argv": [str(exe), "--version"]})
    assert found["engine_build"] == "llama.cpp 0.6.0-dev b0-unknown (built with GNU 13.3.0 for Linux x86_64)"
    absent = run_module("specsweep_host_facts", {"hardware": False, "version_argv": [str(tmp_path / "nope")]})
    assert absent["engine_build"] is None
