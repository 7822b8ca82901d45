"""Running the sweep playbook from tests: where the repo is, and what a finished run left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml
from testhosts import NetnsHosts

from analysis.facts.schema import Fact, load_fact

REPO = Path(__file__).resolve().parents[2]
# The engine and model pins the llama_server role installs, from its defaults.
ENGINE_PINS = yaml.safe_load((REPO / "roles/llama_server/defaults/main.yml").read_text())[
    "llama_server_packages"
]
WHEELHOUSE = REPO / ".cache" / "wheels"


# Two short repetitive prompts instead of the default four long ones: a test measures that a
# config ran and was recorded, not how fast, and prefill of long prompts was most of its time.
TEST_PROMPTS = REPO / "tests" / "integration" / "prompts" / "short.jsonl"


# One launch per config in grid order, as these tests were written for (later -e wins): each
# launch costs CI time; test_sweep_trust.py runs the launches, the shuffle and the baseline again.
ONE_LAUNCH_EACH = ("-e", "order=grid", "-e", "baseline_every=0", "-e", "finalists=false")


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
