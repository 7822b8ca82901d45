"""Steady load on the real engine: at -e concurrency=8 the llama.cpp server itself has 8 requests
in its slots through the measured window (sampled in the host from /slots, not from the client, and
recorded by the client from the server's /metrics), its request rate keeps Little's law (c / mean
latency, the goodput recommend reports with it), and a level the client did not hold (open-loop
arrivals too slow for it) is marked in the table and in recommend's JSON, not reported as met."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from sweeps import REPO
from testhosts import NetnsHosts

HOST = "sshost1"
SERVER = "http://127.0.0.1:8080"  # llama_server_port's default, inside the host's network
# Samples the server's busy slots ~20 times a second (an observer: the sweep never waits on it).
SAMPLER = """
import json, sys, time, urllib.request
url, out = sys.argv[1], sys.argv[2]
with open(out, "a") as fh:
    while True:
        try:
            with urllib.request.urlopen(url + "/slots", timeout=5) as resp:
                slots = json.load(resp)
            fh.write(f"{time.time()} {sum(1 for s in slots if s.get('is_processing'))}\\n")
            fh.flush()
        except (OSError, ValueError):
            pass  # no server yet, or between configs
        time.sleep(0.05)
"""
SMALL = ("-e", f"target={HOST}", "-e", "steps=1", "-e", "baseline=false", "-e", "warmup=0")


def recommend_json(sweep_dir: Path, *extra: str) -> dict:
    """`python -m analysis recommend DIR --format json` of a one-host sweep."""
    argv = [sys.executable, "-m", "analysis", "recommend", str(sweep_dir), "--format", "json", *extra]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_concurrency_8_holds_8_in_the_servers_slots_and_a_level_not_held_is_marked(
    sweep_inventory: Path, ssh_hosts: NetnsHosts, run_sweep, tmp_path: Path
) -> None:
    samples = tmp_path / "slots.txt"
    sampler = ssh_hosts.spawn_in_host(HOST, [sys.executable, "-c", SAMPLER, SERVER, str(samples)])
    try:
        # The fewest requests the plan takes at c = 8 (a window of 8, 7 left out at each end), of 32
        # tokens: a busy slot's admission waits for a decode step, about 1 in 33.
        run = run_sweep(sweep_inventory, *SMALL, "-e", "concurrency=8", "-e", "repeats=1",
                        "-e", "max_tokens=32", "-e", "bench_requests=22")  # fmt: skip
    finally:
        sampler.terminate()  # the process we started, by its PID
        sampler.wait(timeout=30)
    assert run.proc.returncode == 0, run.output[-4000:]
    (fact,) = run.facts().values()
    points = [tuple(map(float, line.split())) for line in samples.read_text().splitlines()]
    for r in fact.runs:
        assert r.window_start_at is not None and r.window_end_at is not None
        busy = [n for t, n in points if r.window_start_at <= t <= r.window_end_at]
        assert len(busy) >= 10, (len(busy), r.duration_s)
        assert statistics.mean(busy) >= 7.2, busy  # the server's own count, not the client's
        # The fact's own server figure (/metrics every 0.5 s) says the same: 8 running, none queued.
        load = r.server_load
        assert load is not None and load.samples >= 3, (load, r.duration_s)
        assert abs(load.running_mean - statistics.mean(busy)) <= 1.0 and load.queued_max == 0, load
        assert r.achieved_concurrency is not None and r.achieved_concurrency >= 7.2
        assert r.requests_sent == 22 and len(r.requests) == 22 - 2 * 7  # ramp and drain left out
        # Little's law: served inside the window / its length = in flight / latency. The requests
        # wholly inside alone read it low (the 7 straddling each edge left out).
        assert r.window_requests is not None
        little = r.achieved_concurrency / statistics.mean(q.e2e_s for q in r.requests)
        assert abs(r.window_requests / r.duration_s / little - 1) < 0.3, (
            r.window_requests,
            r.duration_s,
            little,
        )
    # Every request good under a loose SLO: goodput is the window's request rate.
    level = recommend_json(run.sweep_dir, "--sla-ttft-p99-ms", "600000")["by_concurrency"]["8"]
    assert level["level_reached"] is True
    (r,) = fact.runs
    assert level["goodput_rps"] == pytest.approx(r.window_requests / r.duration_s, rel=1e-6)

    # Open loop, 6 arrivals at 1 per second: never 8 in flight, however slow the machine is.
    slow = run_sweep(sweep_inventory, *SMALL, "-e", "concurrency=8", "-e", "repeats=1",
                     "-e", "max_tokens=4", "-e", "bench_requests=6", "-e", "request_rate=1",
                     sweep_id=f"{tmp_path.name}-slow")  # fmt: skip
    assert slow.proc.returncode == 0, slow.output[-4000:]
    (r,) = [r for f in slow.facts().values() for r in f.runs]
    assert r.achieved_concurrency is not None and r.achieved_concurrency < 7.2
    # The table shows the server's running count where it gave one (fewer: some arrivals wait for
    # nothing, but the client's count includes each request's time on the wire).
    assert r.server_load is not None and r.server_load.queued_max == 0, r.server_load
    row = next(line for line in slow.output.splitlines() if line.split()[:2] in (["s1"], ["*", "s1"]))
    assert f"{r.server_load.running_mean:.1f} <" in row, row  # marked in the sweep's own table
    level = recommend_json(slow.sweep_dir)["by_concurrency"]["8"]
    assert level["level_reached"] is False and "level not reached" in level["reason"]
