"""Running the sweep playbook from tests: where the repo is, and what a finished run left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from testhosts import NetnsHosts

from analysis.facts.schema import Fact, load_fact

REPO = Path(__file__).resolve().parents[2]
# The engine and model pins the llama_server role installs, from its defaults.
ENGINE_PINS = yaml.safe_load((REPO / "roles/llama_server/defaults/main.yml").read_text())[
    "llama_server_packages"
]
WHEELHOUSE = REPO / ".cache" / "wheels"
# What the llama_server role installs under llama_server_home (/opt/specsweep), from its tasks.
ENGINE_FILES = ("llama.cpp-venv", "models", "specsweep_llama_server.py")


# Two short repetitive prompts instead of the default four long ones: a test measures that a
# config ran and was recorded, not how fast, and prefill of long prompts was most of its time.
TEST_PROMPTS = REPO / "tests" / "integration" / "prompts" / "short.jsonl"


# One launch per config in grid order, as these tests were written for (later -e wins): each
# launch costs CI time; test_sweep_trust.py runs the launches, the shuffle and the baseline again,
# and the checkpoint read ahead during each benchmark (one more module call per launch here).
ONE_LAUNCH_EACH = ("-e", "order=grid", "-e", "baseline_every=0", "-e", "finalists=false",
                   "-e", "prefetch=false")  # fmt: skip


# Enough to prove a config ran and was recorded: one short repeat, one request per test prompt (by
# default a level sends 4 x its concurrency, and each request is a prefill and a decode of CPU time).
QUICK = ("-e", "repeats=1", "-e", "max_tokens=8", "-e", "warmup=0", "-e", "bench_requests=2")


@dataclass
class SweepRun:
    """One finished ansible-playbook run and where it wrote its results."""

    proc: subprocess.CompletedProcess[str]
    sweep_dir: Path

    @property
    def output(self) -> str:
        return self.proc.stdout + self.proc.stderr

    def facts(self) -> dict[tuple[str, str], Fact]:
        """Every fact of the sweep, by (host, config id)."""
        out = {}
        for path in sorted(self.sweep_dir.glob("*/*.json")):
            fact = load_fact(json.loads(path.read_text()))
            out[(fact.host, fact.config.id)] = fact
        return out


def sweep_env() -> dict[str, str]:
    """The caller's environment without ANSIBLE_* overrides: the repo's ansible.cfg applies."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    return env


def playbook_argv(inventory: Path, results: Path, *extra: str) -> list[str]:
    """The ansible-playbook command line for a sweep with results under `results`."""
    return [
        str(Path(sys.executable).parent / "ansible-playbook"), "sweep.yml", "-i", str(inventory),
        "-e", f"results_dir={results}", *ONE_LAUNCH_EACH, *extra,
    ]  # fmt: skip


def playbook(inventory: Path, results: Path, sweep_id: str, *extra: str, timeout: float = 900) -> SweepRun:
    """Run `ansible-playbook sweep.yml` from the repo root and wait for it."""
    argv = playbook_argv(inventory, results, "-e", f"sweep_id={sweep_id}", *extra)
    proc = subprocess.run(argv, cwd=REPO, env=sweep_env(), capture_output=True, text=True, timeout=timeout)
    return SweepRun(proc, results / sweep_id)


def host_vars(hosts: NetnsHosts, wheelhouse: Path) -> dict[str, dict]:
    """Per-host settings: everything the suite writes lives under the host's own /opt."""
    return {
        name: {
            "specsweep_engine": "llama_cpp",
            "llama_server_home": "/opt/specsweep",
            "llama_server_pip_extra_args": ["--no-index", f"--find-links={wheelhouse}"],
            "server_process_run_dir": "/opt/specsweep/run",
            "benchmark_work_dir": "/opt/specsweep/bench",
            "benchmark_prompt_set": str(TEST_PROMPTS),
        }
        for name in hosts.names
    }


def copy_engine(installed: Path, opt_dirs: Iterable[Path]) -> None:
    """Give hosts the engine another host installed: hard links of its /opt/specsweep files.

    installed and opt_dirs: hosts' /opt seen from the controller. The paths inside a venv are the
    same on every host, and nothing writes into these files after the install (tests break copies).
    For tests of what a fleet does, not of the install (sweep_inventory's), which is 600 MB per host.
    """
    for opt in opt_dirs:
        home = opt / "specsweep"
        home.mkdir(parents=True, exist_ok=True)
        for name in ENGINE_FILES:
            subprocess.run(["cp", "-al", str(installed / "specsweep" / name), str(home / name)], check=True)


def start_sweep(inventory: Path, results: Path, *extra: str) -> subprocess.Popen:
    """ansible-playbook sweep.yml in the background, logging to results/sweep.log."""
    log = open(results / "sweep.log", "wb")  # noqa: SIM115 - the child writes it
    return subprocess.Popen(playbook_argv(inventory, results, *extra), cwd=REPO, env=sweep_env(),
                            stdout=log, stderr=subprocess.STDOUT)  # fmt: skip


def wait_for(
    check: Callable[[], Any], what: str, proc: subprocess.Popen | None = None, timeout: float = 600
) -> Any:
    """Poll check() until it is truthy and return what it gave; fail naming `what` at the deadline
    or when `proc` (the sweep, if given) ended first."""
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert proc is None or proc.poll() is None, f"the sweep ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f} s"
        time.sleep(0.05)  # polling a condition, bounded by the deadline
    return found
