"""What reading the checkpoint ahead (-e prefetch) saves a launch whose weights left the page cache.

Not a test: numbers, not verdicts. Needs root (it empties the page cache). Each run empties the
page cache (`sync; echo 3 > /proc/sys/vm/drop_caches`), then either asks for the demo model's
GGUF with the sweep's own helper (plugins/module_utils/specsweep_prefetch.py: posix_fadvise
WILLNEED) or not, waits `--overlap` seconds either way (the benchmark the read-ahead overlaps in a
sweep), and launches the demo's llama-server (the demo's argv: the launcher, 1 thread, 2048 ctx, 1
slot, a free port). The load is what a sweep records as `load_s`: from the launch until /health
answers 200 and a one-token generation answers (plugins/modules/specsweep_wait.py's proof); the
first generation counts because llama.cpp maps the GGUF and touches weights as it uses them.
"resident" is the GGUF's share in the page cache just before the launch (util-linux fincore).
Both modes alternate, so the machine's load falls on both alike. Emptying the cache slows every
other process on the machine for a moment: run it where that is acceptable.

    sudo .venv/bin/python bench/prefetch.py [--runs 5] [--overlap 10]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins" / "module_utils"))

from specsweep_prefetch import willneed  # noqa: E402  (host-side helper, stdlib: imported by path)

LAUNCHER = REPO / "roles/llama_server/files/specsweep_llama_server.py"
CACHE = Path.home() / ".cache" / "specsweep"


def drop_caches() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def resident(path: Path) -> float:
    """The share of `path` in the page cache (0..1), by util-linux fincore."""
    out = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return int(out.stdout.split()[0]) / path.stat().st_size


def ready(url: str) -> bool:
    """/health answers 200 and a one-token generation works (the sweep's readiness)."""
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as resp:
            if resp.status != 200:
                return False
        body = json.dumps({"prompt": "Hello", "n_predict": 1, "temperature": 0}).encode()
        req = urllib.request.Request(url + "/completion", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status == 200
    except (OSError, urllib.error.URLError):
        return False


def load_s(python: Path, model: Path) -> float:
    """Seconds from the launch of a llama-server until it is ready; it is stopped after."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = [str(python), str(LAUNCHER), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
            "-c", "2048", "-np", "1", "-t", "1"]  # fmt: skip
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not ready(f"http://127.0.0.1:{port}"):
            if proc.poll() is not None:
                raise RuntimeError(f"llama-server exited {proc.returncode} before it was ready")
            time.sleep(0.05)  # polling the server, as specsweep_wait does
        return time.monotonic() - start
    finally:
        proc.terminate()  # the one this bench started
        proc.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--overlap", type=float, default=10.0, help="seconds between the ask and the launch")
    parser.add_argument("--model", type=Path, default=CACHE / "models" / "gemma-3-270m-q4_k_m.gguf")
    parser.add_argument("--python", type=Path, default=CACHE / "llama.cpp-venv" / "bin" / "python")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        parser.error("needs root: it empties the page cache")
    times: dict[str, list[float]] = {"without": [], "with prefetch": []}
    cached: dict[str, list[float]] = {k: [] for k in times}
    for i in range(args.runs):
        modes = list(times) if i % 2 == 0 else list(reversed(times))
        for mode in modes:
            drop_caches()
            if mode == "with prefetch":
                willneed([str(args.model)])
            time.sleep(args.overlap)  # the benchmark the read-ahead overlaps
            cached[mode].append(resident(args.model))
            times[mode].append(load_s(args.python, args.model))
    size_mb = args.model.stat().st_size / 1e6
    print(
        f"{args.model.name} ({size_mb:.0f} MB), page cache emptied before each launch, {args.runs} runs per "
        f"mode, {args.overlap:g} s between the ask and the launch; load average {os.getloadavg()[0]:.1f} "
        f"on {os.cpu_count()} CPUs"
    )
    print(f"{'mode':<14} {'median load s':>13} {'min':>6} {'max':>6} {'resident at launch':>19}")
    for mode, values in times.items():
        print(
            f"{mode:<14} {statistics.median(values):>13.2f} {min(values):>6.2f} {max(values):>6.2f} "
            f"{statistics.median(cached[mode]):>18.0%}"
        )
    saved = statistics.median(times["without"]) - statistics.median(times["with prefetch"])
    print(f"saved per launch: {saved:.2f} s (median against median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
