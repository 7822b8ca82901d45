"""Requests in flight, achieved against asked, at c = 1, 4, 16 on the demo model: the client before
the steady-load change (its file at a base commit) and this tree's, against one real llama-server.

Not a test: numbers, not verdicts. One llama-server (the demo's 270M model, 16 slots, no
speculation) serves both clients; a thread samples the server's busy slots (/slots `is_processing`)
about 20 times a second, so "in flight" is the server's own count, not the client's. The earlier
client has no measured window: its figure is the mean over the span the server was busy with the
run (first to last busy sample). This tree's is over the run's window (docs/load.md), beside the
client's own time-weighted figure (`achieved_concurrency`).

    .venv/bin/python bench/load.py [--before 4f62a9a] [--levels 1,4,16] [--max-tokens 32]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLIENT = "roles/benchmark/files/specsweep_bench.py"
PROMPTS = REPO / "roles/benchmark/files/prompts/code.jsonl"  # the demo's prompt set: 4 prompts
LAUNCHER = REPO / "roles/llama_server/files/specsweep_llama_server.py"
CACHE = Path.home() / ".cache" / "specsweep"


class Slots(threading.Thread):
    """Samples (epoch seconds, busy slots) from the server until stopped."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.points, self.stopped = url, [], threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.05):
            try:
                with urllib.request.urlopen(f"{self.url}/slots", timeout=5) as resp:
                    busy = sum(1 for s in json.load(resp) if s.get("is_processing"))
            except (OSError, ValueError):
                continue
            self.points.append((time.time(), busy))

    def mean(self, start: float, end: float) -> float:
        """Mean busy slots sampled in [start, end]."""
        inside = [n for t, n in self.points if start <= t <= end]
        return statistics.mean(inside) if inside else float("nan")

    def busy_span(self, since: float) -> tuple[float, float]:
        """First and last sample after `since` with a busy slot."""
        busy = [t for t, n in self.points if t >= since and n > 0]
        return (busy[0], busy[-1]) if busy else (since, since)


def start_server(
    python: Path, model: Path, slots: int, log: Path, extra: tuple[str, ...] = ()
) -> tuple[subprocess.Popen, str]:
    """The demo's llama-server with `slots` slots (and `extra` flags, e.g. a draft); returns it once
    /health answers 200."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    argv = [str(python), str(LAUNCHER), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
            "-t", "1", "-c", str(1024 * slots), "-np", str(slots), *extra]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as resp:
                if resp.status == 200:
                    return proc, url
        except OSError:
            pass
        time.sleep(0.25)  # polling a server that loads, not synchronising tests
    proc.terminate()
    raise SystemExit(f"llama-server did not become healthy; see {log}")


def run_client(client: Path, url: str, level: int, max_tokens: int) -> dict:
    """One repeat at one level; the client's document."""
    argv = [sys.executable, str(client), "--engine", "llama_cpp", "--url", url, "--prompts", str(PROMPTS),
            "--max-tokens", str(max_tokens), "--warmup", "0", "--repeats", "1",
            "--concurrency", str(level)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="4f62a9a", help="commit of the earlier client")
    parser.add_argument("--levels", default="1,4,16")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--engine-python", type=Path, default=CACHE / "llama.cpp-venv" / "bin" / "python")
    parser.add_argument("--model", type=Path, default=CACHE / "models" / "gemma-3-270m-q4_k_m.gguf")
    args = parser.parse_args()
    levels = [int(c) for c in args.levels.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before_bench.py"
        source = subprocess.run(["git", "show", f"{args.before}:{CLIENT}"], cwd=REPO, capture_output=True,
                                text=True, check=True).stdout  # fmt: skip
        before.write_text(source)
        server, url = start_server(args.engine_python, args.model, max(levels), Path(tmp) / "server.log")
        slots = Slots(url)
        slots.start()
        rows = []
        try:
            run_client(REPO / CLIENT, url, 1, 4)  # warm the server once, unmeasured
            for level in levels:
                since = time.time()
                run_client(before, url, level, args.max_tokens)
                old = slots.mean(*slots.busy_span(since))
                (run,) = run_client(REPO / CLIENT, url, level, args.max_tokens)["runs"]
                new = slots.mean(run["window_start_at"], run["window_end_at"])
                rows.append((level, old, run["achieved_concurrency"], new, run["requests_sent"],
                             len(run["requests"])))  # fmt: skip
        finally:
            slots.stopped.set()
            server.terminate()  # the server this script started
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=60)
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    head = f"llama-server, {args.model.name}, {args.max_tokens} tokens, {PROMPTS.name} (4 prompts)"
    after = rev.stdout.strip()
    print(f"requests in flight, achieved vs asked ({head}); before = {args.before}, after = {after}")
    print(
        "asked c | before: server in flight | after: client (window) | after: server (window) | sent/counted"
    )
    for level, old, client, new, sent, counted in rows:
        print(f"{level:>7} | {old:>24.2f} | {client:>22.2f} | {new:>22.2f} | {sent:>5}/{counted}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
