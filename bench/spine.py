"""Measure the sweep's own costs on this machine and print a table (not a test: numbers, not verdicts).

Rows (targets from the spine issue where it set one):
- readiness detection: /health first answers 200 -> specsweep_wait notices (p50 <= 0.5 s, max <= 1.5 s);
- crash-at-load detection: the server exits (its model is missing), as its supervisor recorded the
  exit -> specsweep_wait fails with cause model_not_found (<= 5 s);
- hang detection, stopped: the loading server gets SIGSTOP -> specsweep_wait fails with cause hung;
- hang detection, silent: a server with no log output and no CPU time from its launch on -> cause
  hung, in seconds past `--stall-s` (the module samples the group's CPU time and the log once a second);
- orchestration overhead: sweep wall time / sum(engine load + benchmark) of its configs (<= 1.05),
  and the rest per config in seconds (plan, preflight, the report and every step between included).

The detection rows drive today's launch path with the real modules, run as on a host (as the unit
tests run them, tests/unit/module_runner.py): specsweep_server starts a real llama.cpp server under
its supervisor, which writes the pid record specsweep_wait reads; the argv is the one the plan
renders for a baseline config (analysis.engines, with the llama_server role's defaults). The
server is held back `--delay` seconds (a python that sleeps, then execs it, keeping its pid) so the
module is already polling when the server comes up, dies or is stopped (on a loaded machine the
module's own start can take longer: the hang rows then include it). The overhead rows run the real
`ansible-playbook sweep.yml` (steps 1,2,4 and the baseline: 4 configs) at small settings (repeats 2
of 32 tokens, no warm-up) on `--inventory` (default: the repo's, this machine). Run after the demo
(it installs the engine and model under ~/.cache/specsweep):

    .venv/bin/python bench/spine.py [--repeats 5] [--sweeps 1] [--inventory FILE]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), *(str(REPO / "tests" / sub) for sub in ("", "unit", "integration"))]

from module_runner import run_module  # noqa: E402 - after the path set-up, as a script
from sweeps import playbook  # noqa: E402

from analysis.engines import ENGINES  # noqa: E402
from analysis.sweep.config import make  # noqa: E402

HOME = Path.home() / ".cache" / "specsweep"
LAUNCHER = REPO / "roles" / "llama_server" / "files" / "specsweep_llama_server.py"
# Sleeps argv[1] seconds, then becomes argv[2:] under the same pid (the supervisor's server_pid).
HOLD_BACK = "import os, sys, time; time.sleep(float(sys.argv[1])); os.execv(sys.argv[2], sys.argv[2:])"
FIRST_PORT = 18600


def role_defaults(role: str) -> dict[str, Any]:
    """A role's defaults/main.yml, its prefix taken off (Jinja values stay unrendered: override them)."""
    values = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text())
    return {key.removeprefix(f"{role}_"): value for key, value in values.items()}


WAIT = role_defaults("wait_for_health")


class Servers:
    """Launches and waits for servers with the real modules; every server is stopped by its record."""

    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args, self.workdir = args, workdir
        self.port = FIRST_PORT

    def launch(self, model: Path, delay_s: float) -> dict[str, Any]:
        """Start a server on the next port under its supervisor, held back `delay_s`; the wait
        module's arguments for it, and the launch record under `record`."""
        self.port += 1
        engine = ENGINES["llama_cpp"]
        settings = {**role_defaults("llama_server"), "command": [str(self.args.engine_python), str(LAUNCHER)],
                    "model_path": str(model), "port": self.port}  # fmt: skip
        argv = engine.argv(make(), settings, 1)
        pidfile, log = self.workdir / f"server-{self.port}.pid", self.workdir / f"server-{self.port}.log"
        record = run_module("specsweep_server", {
            "state": "started", "argv": [argv[0], "-c", HOLD_BACK, str(delay_s), *argv],
            "env": engine.base_env(settings), "pidfile": str(pidfile), "log_path": str(log),
            "port": self.port,
        })  # fmt: skip
        if record.get("failed"):
            raise RuntimeError(f"launch failed: {record}")
        return {"record": record, "engine": "llama_cpp", "url": f"http://127.0.0.1:{self.port}",
                "pidfile": str(pidfile), "log_path": str(log), "timeout_s": 120, "slice_s": 120,
                "poll_interval_s": WAIT["poll_interval_s"], "stall_s": WAIT["stall_s"]}  # fmt: skip

    def wait(self, server: dict[str, Any], **extra: Any) -> dict[str, Any]:
        """The specsweep_wait module's result for `server`; the server is stopped after it."""
        try:
            args = {k: v for k, v in {**server, **extra}.items() if k != "record"}
            return run_module("specsweep_wait", args)
        finally:
            down = run_module("specsweep_server", {"state": "stopped", "pidfile": server["pidfile"],
                                                   "port": self.port, "stop_timeout_s": 10})  # fmt: skip
            if down.get("failed"):
                raise RuntimeError(f"stop failed: {down}")


def beside(work: Callable[[], Any], watch: Callable[[threading.Event], None]) -> Any:
    """work() while watch(stop) runs in a thread; stop is set and the thread joined after it."""
    stop = threading.Event()
    thread = threading.Thread(target=watch, args=(stop,))
    thread.start()
    try:
        return work()
    finally:
        stop.set()
        thread.join()


def readiness(servers: Servers, repeats: int) -> list[float]:
    """Seconds from the first healthy answer to the module noticing it."""
    out = []
    for _ in range(repeats):
        server = servers.launch(servers.args.model, servers.args.delay)
        seen: list[float] = []

        def first_200(stop: threading.Event, url: str = f"{server['url']}/health", seen: list = seen) -> None:
            while not stop.is_set():  # every 5 ms, for when /health first answers 200
                try:
                    with urllib.request.urlopen(url, timeout=0.5) as resp:
                        if resp.status == 200:
                            seen.append(time.time())
                            return
                except OSError:
                    pass
                time.sleep(0.005)

        result = beside(lambda server=server: servers.wait(server), first_200)
        if not result.get("ready") or not seen:
            raise RuntimeError(f"server on {server['url']} never became ready: {result}")
        out.append(result["health_ok_at"] - seen[0])
    return out


def crash_detection(servers: Servers, repeats: int) -> list[float]:
    """Seconds from the server process exiting (its model is missing) to the module failing."""
    out = []
    for _ in range(repeats):
        server = servers.launch(servers.workdir / "missing.gguf", servers.args.delay)
        result = servers.wait(server)
        if result.get("cause") != "model_not_found" or not result.get("exit"):
            raise RuntimeError(f"unexpected result: {result}")
        out.append(result["noticed_at"] - result["exit"]["exited_at"])
    return out


def hang_stopped(servers: Servers, repeats: int) -> list[float]:
    """Seconds from SIGSTOP to the loading server (just exec'd) to the module failing with `hung`."""
    out = []
    for _ in range(repeats):
        server = servers.launch(servers.args.model, servers.args.delay)
        pid = server["record"]["server_pid"]
        stopped_at: list[float] = []

        def stop_when_loading(stop: threading.Event, pid: int = pid, out: list = stopped_at) -> None:
            while not stop.is_set():  # the hold-back is over once the pid runs the launcher
                try:
                    if str(LAUNCHER).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                        out.append(time.time())
                        os.kill(pid, signal.SIGSTOP)
                        return
                except OSError:
                    return
                time.sleep(0.005)

        result = beside(lambda server=server: servers.wait(server), stop_when_loading)
        if result.get("cause") != "hung" or result.get("process_state") != "T" or not stopped_at:
            raise RuntimeError(f"unexpected result: {result}")
        out.append(result["noticed_at"] - stopped_at[0])
    return out


def hang_silent(servers: Servers, repeats: int) -> list[float]:
    """Seconds past stall_s from a launch that stays silent and idle (held back past it) to `hung`."""
    out = []
    stall_s = servers.args.stall_s
    for _ in range(repeats):
        server = servers.launch(servers.args.model, stall_s + 60)
        result = servers.wait(server, stall_s=stall_s)
        if result.get("cause") != "hung" or "stalled_s" not in result:
            raise RuntimeError(f"unexpected result: {result}")
        out.append(result["noticed_at"] - server["record"]["started_at"] - stall_s)
    return out


def overhead(args: argparse.Namespace, results: Path, sweep_id: str) -> dict[str, float]:
    """Wall time, engine time (load + benchmark), configs, their ratio and the rest per config, of
    one sweep."""
    settings = {"steps": args.steps, "baseline": str(args.baseline).lower(), "repeats": args.bench_repeats,
                "max_tokens": args.max_tokens, "warmup": 0}  # fmt: skip
    if args.target:
        settings["target"] = args.target
    extra = [word for key, value in settings.items() for word in ("-e", f"{key}={value}")]
    started = time.monotonic()
    run = playbook(args.inventory, results, sweep_id, *extra, timeout=3600)
    wall = time.monotonic() - started
    if run.proc.returncode != 0:
        raise RuntimeError(run.output[-4000:])
    facts = run.facts().values()
    engine = sum(f.timings.load_s + f.timings.bench_s for f in facts)
    return {"wall": wall, "engine": engine, "configs": len(facts), "ratio": wall / engine,
            "per_config": (wall - engine) / len(facts)}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="launches per detection row")
    parser.add_argument("--delay", type=float, default=4.0, help="seconds a server is held back")
    parser.add_argument("--stall-s", type=float, default=3.0, help="stall_s of the silent-hang row")
    parser.add_argument("--engine-python", type=Path, default=HOME / "llama.cpp-venv" / "bin" / "python")
    parser.add_argument("--model", type=Path, default=HOME / "models" / "gemma-3-270m-q4_k_m.gguf")
    parser.add_argument("--sweeps", type=int, default=1, help="repeats of the overhead sweep")
    parser.add_argument("--inventory", type=Path, default=REPO / "inventory" / "hosts.yml")
    parser.add_argument("--target", default="", help="the sweep's -e target (default: the sweep group)")
    parser.add_argument("--steps", default="1,2,4", help="the sweep's -e steps")
    parser.add_argument("--baseline", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--bench-repeats", type=int, default=2, help="the sweep's -e repeats")
    parser.add_argument("--max-tokens", type=int, default=32, help="the sweep's -e max_tokens")
    args = parser.parse_args()
    if not (args.engine_python.exists() and args.model.exists()):
        sys.exit("run the demo first (README): it installs the engine and model under ~/.cache/specsweep")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        servers = Servers(args, work)
        ready = readiness(servers, args.repeats)
        crash = crash_detection(servers, args.repeats)
        stopped = hang_stopped(servers, args.repeats)
        silent = hang_silent(servers, args.repeats)
        sweeps = [overhead(args, work, f"overhead{i}") for i in range(args.sweeps)]
    configs = sweeps[0]["configs"]
    rows = [
        ("readiness detection (s)", ready, "p50 <= 0.5, max <= 1.5"),
        ("crash-at-load detection (s)", crash, "<= 5"),
        ("hang detection, SIGSTOP while loading (s)", stopped, ""),
        (f"hang detection, silent and idle: past stall_s {args.stall_s:g} (s)", silent, ""),
        (f"orchestration overhead (ratio, {configs} configs)", [s["ratio"] for s in sweeps], "<= 1.05"),
        ("orchestration overhead per config (s)", [s["per_config"] for s in sweeps], ""),
        ("sweep wall time (s)", [s["wall"] for s in sweeps], ""),
        ("engine load + benchmark, all configs (s)", [s["engine"] for s in sweeps], ""),
    ]
    print(f"load average {os.getloadavg()[0]:.1f}; sweep: -e steps={args.steps} baseline={args.baseline} "
          f"repeats={args.bench_repeats} max_tokens={args.max_tokens} warmup=0")  # fmt: skip
    print("| measurement | n | median | max | target |")
    print("|---|---|---|---|---|")
    for name, values, target in rows:
        print(f"| {name} | {len(values)} | {statistics.median(values):.3f} | {max(values):.3f} | {target} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
