"""Measure the sweep's own costs on this machine and print a table (not a test: numbers, not verdicts).

Rows (targets from the spine issue):
- readiness detection: server healthy -> wait_for_health notices (p50 <= 0.5 s, max <= 1.5 s);
- crash-at-load detection: server process exits -> wait_for_health fails (<= 5 s);
- orchestration overhead: sweep wall time / sum(engine load + benchmark) for 4 configs (<= 1.05).

The first two drive the real specsweep_wait module through `ansible` against a real llama.cpp
server started here; the server is held back a few seconds (a python that sleeps, then execs
the launcher, keeping its pid) so the module is already polling when the server comes up or dies.
Run after the demo (it installs the engine): `.venv/bin/python bench/spine.py`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOME = Path.home() / ".cache" / "specsweep"
ENGINE_PY = HOME / "llama.cpp-venv" / "bin" / "python"
LAUNCHER = HOME / "specsweep_llama_server.py"
MODEL = HOME / "models" / "gemma-3-270m-q4_k_m.gguf"
BIN = Path(sys.executable).parent


def start_delayed(port: int, model: Path, delay_s: float, workdir: Path) -> tuple[subprocess.Popen, Path]:
    """Start the launcher `delay_s` after this call, under a pid known now; write its pidfile."""
    argv = [str(LAUNCHER), "-m", str(model), "--port", str(port), "-t", "1"]
    code = (
        f"import os, sys, time; time.sleep({delay_s}); "
        "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
    )
    log = open(workdir / f"server-{port}.log", "wb")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen([str(ENGINE_PY), "-c", code, *argv], stdout=log, stderr=subprocess.STDOUT)
    stat = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    pidfile = workdir / f"server-{port}.pid"
    pidfile.write_text(json.dumps({"pid": proc.pid, "start_ticks": int(stat[19]), "argv": argv}))
    return proc, pidfile


def first_200(url: str, stop: threading.Event, out: list[float]) -> None:
    """Record when /health first answers 200, polling every 5 ms."""
    while not stop.is_set():
        try:
            with urllib.request.urlopen(url, timeout=0.5) as resp:
                if resp.status == 200:
                    out.append(time.time())
                    return
        except OSError:
            pass
        time.sleep(0.005)


def run_wait(port: int, pidfile: Path, log: Path) -> dict:
    """Run the real specsweep_wait module once through `ansible` and return its result."""
    args = (
        f"engine=llama_cpp url=http://127.0.0.1:{port} pidfile={pidfile} log_path={log} "
        "timeout_s=60 slice_s=60 poll_interval_s=0.25"
    )
    proc = subprocess.run(
        [str(BIN / "ansible"), "localhost", "-o", "-m", "specsweep_wait", "-a", args],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return json.loads(proc.stdout.split("=>", 1)[1])


def readiness(repeats: int, workdir: Path) -> list[float]:
    """Seconds from the first healthy answer to the module noticing it."""
    out = []
    for i in range(repeats):
        port = 18600 + i
        proc, pidfile = start_delayed(port, MODEL, 4.0, workdir)
        seen: list[float] = []
        stop = threading.Event()
        poller = threading.Thread(target=first_200, args=(f"http://127.0.0.1:{port}/health", stop, seen))
        poller.start()
        try:
            result = run_wait(port, pidfile, workdir / f"server-{port}.log")
        finally:
            stop.set()
            poller.join()
            proc.terminate()
            proc.wait()
        if not result.get("ready") or not seen:
            raise RuntimeError(f"server on {port} never became ready: {result}")
        out.append(result["health_ok_at"] - seen[0])
    return out


def crash_detection(repeats: int, workdir: Path) -> list[float]:
    """Seconds from the server process exiting (model missing) to the module failing."""
    out = []
    for i in range(repeats):
        port = 18700 + i
        proc, pidfile = start_delayed(port, workdir / "missing.gguf", 4.0, workdir)
        exited: list[float] = []
        waiter = threading.Thread(target=lambda p=proc, out=exited: (p.wait(), out.append(time.time())))
        waiter.start()
        result = run_wait(port, pidfile, workdir / f"server-{port}.log")
        waiter.join()
        if result.get("cause") != "model_not_found":
            raise RuntimeError(f"unexpected result: {result}")
        out.append(result["noticed_at"] - exited[0])
    return out


def overhead(results: Path) -> float:
    """Sweep wall time / sum(load + benchmark) over a 4-config sweep on localhost."""
    t0 = time.monotonic()
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "sweep.yml", "-e", "steps=1,2,4",
         "-e", f"results_dir={results}", "-e", "sweep_id=overhead"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(proc.stdout[-3000:])
    facts = [json.loads(p.read_text()) for p in (results / "overhead").glob("*/*.json")]
    engine = sum(f["timings"]["load_s"] + f["timings"]["bench_s"] for f in facts)
    return wall / engine


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sweeps", type=int, default=1, help="repeats of the 4-config overhead sweep")
    args = parser.parse_args()
    if not (ENGINE_PY.exists() and MODEL.exists()):
        sys.exit("run the demo first (README): it installs the engine and model under ~/.cache/specsweep")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ready = readiness(args.repeats, work)
        crash = crash_detection(args.repeats, work)
        ratios = [overhead(work / f"sweep{i}") for i in range(args.sweeps)]
    rows = [
        ("readiness detection (s)", ready, "p50 <= 0.5, max <= 1.5"),
        ("crash-at-load detection (s)", crash, "<= 5"),
        ("orchestration overhead (ratio, 4 configs)", ratios, "<= 1.05"),
    ]
    print("| measurement | n | median | max | target |")
    print("|---|---|---|---|---|")
    for name, values, target in rows:
        print(f"| {name} | {len(values)} | {statistics.median(values):.3f} | {max(values):.3f} | {target} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
