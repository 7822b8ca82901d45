"""The client's load generator: c units in flight for the whole window, the window's rule, the
achieved-concurrency math, open-loop arrivals; main() against an in-process stdlib stand-in server
(a unit test of the client only; the real engine is in tests/integration/test_steady_load.py)."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from test_bench_client import bench

from analysis.facts.schema import BenchmarkSettings, Run, from_dict
from analysis.sweep import request

WAIT_S = 10.0  # a barrier that waits this long has been starved: the test fails, never hangs


def result(tokens: int = 4, ttft: float = 0.0, error: str | None = None) -> dict[str, Any]:
    """A RequestResult dict."""
    return {"prompt_id": "p", "output_tokens": tokens, "ttft_s": ttft, "e2e_s": 1.0, "decode_tps": 3.0,
            "itl_s": [0.1], "text": "x", "error": error}  # fmt: skip


def unit(sent: float, done: float, tokens: int = 4, ttft: float = 0.0) -> Any:
    """A finished unit of one request with counters."""
    counters = {"output_tokens": tokens, "drafted": 2, "accepted": 1, "verify_steps": tokens - 1}
    return bench.Unit(sent, done, [(result(tokens, ttft), counters)])


class InFlight:
    """Work that counts the units inside it and holds each until `parties` are inside at once."""

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=WAIT_S)
        self.lock = threading.Lock()
        self.inside = self.most = 0
        self.records: list[str] = []

    def __call__(self, record: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
            self.records.append(record["id"])
        try:
            self.barrier.wait()  # BrokenBarrierError when the scheduler never gets `parties` in
        finally:
            with self.lock:
                self.inside -= 1
        return [(result(), None)]


RECORDS = [{"id": f"r{i}", "prompt": f"prompt {i}"} for i in range(4)]


@pytest.mark.parametrize("concurrency", [1, 4, 16])
def test_a_closed_loop_keeps_c_units_in_flight_whatever_the_prompt_set_size(concurrency: int) -> None:
    # 4 records, as the old client's prompt set: it never had more than 4 in flight.
    work = InFlight(concurrency)
    load = bench.Load(concurrency, 3 * concurrency)
    units = bench.drive(work, bench.Sampler(RECORDS, random.Random(1)), load, random.Random(2))
    assert len(units) == 3 * concurrency and work.most == concurrency  # every round had c inside


def test_the_records_are_sampled_in_seeded_passes_the_same_for_every_config() -> None:
    first = bench.Sampler(RECORDS, random.Random("42/4/1"))
    again = bench.Sampler(RECORDS, random.Random("42/4/1"))
    drawn = [first()["id"] for _ in range(12)]
    assert drawn == [again()["id"] for _ in range(12)]
    for k in range(3):  # each pass is the whole set once
        assert sorted(drawn[4 * k : 4 * k + 4]) == ["r0", "r1", "r2", "r3"]
    other = bench.Sampler(RECORDS, random.Random("42/4/2"))
    assert [other()["id"] for _ in range(12)] != drawn


def test_a_duration_keeps_sending_until_it_has_passed() -> None:
    ticks = iter(range(10_000))
    load = bench.Load(2, requests=1, duration_s=10.0)  # duration wins over requests
    units = bench.drive(lambda r: [(result(), None)], bench.Sampler(RECORDS, random.Random(1)), load,
                        random.Random(2), clock=lambda: float(next(ticks)))  # fmt: skip
    assert all(u.sent - units[0].sent < 10.0 for u in units)
    assert 3 <= len(units) <= 10  # each send and each completion read the clock once or more


def test_the_window_leaves_out_c_minus_1_at_each_end_of_a_closed_loop() -> None:
    # c = 2, 6 units: two sent at once, then each replaced as one finishes (1 ms later).
    units = [unit(0.0, 1.0), unit(0.001, 1.0), unit(1.0, 2.0), unit(1.001, 2.0), unit(2.0, 3.0),
             unit(2.001, 3.5)]  # fmt: skip
    load = bench.Load(2, 6)
    assert bench.window(units, load) == (0.001, 3.0)  # the 2nd send .. the first completion after the last
    run = bench.level_run(units, load, epoch_offset=1000.0)
    assert len(run["requests"]) == 4 and run["requests_sent"] == 6  # 1 ramp and 1 drain left out
    assert run["duration_s"] == pytest.approx(2.999)
    assert (run["window_start_at"], run["window_end_at"]) == pytest.approx((1000.001, 1003.0))
    assert run["achieved_concurrency"] == pytest.approx((0.999 * 4 + 1.0 * 2) / 2.999)
    assert run["spec"]["drafted"] == 8  # the counted units' counters only
    # Tokens inside the window: the first unit's but 1 ms of them, the last unit's 0.999 of 1.499 s.
    assert run["window_output_tokens"] == pytest.approx(4 * 0.999 + 4 * 4 + 4 * 0.999 / 1.499)
    assert from_dict(Run, {"repeat": 1, **run}).achieved_concurrency == run["achieved_concurrency"]


@pytest.mark.parametrize("concurrency", [1, 4, 16])
def test_the_window_request_rate_keeps_littles_law_at_steady_load(concurrency: int) -> None:
    # A steady closed loop: c slots staggered by 1/c s, each unit 1 s long and replaced at once, so
    # the server serves c requests a second. Counting only the units wholly inside the window read
    # (N - 2(c - 1)) / window: 10 / 3.25 s = 3.1 req/s at c = 4.
    latency, sends = 1.0, 4 * concurrency
    units = [unit(k * latency / concurrency, k * latency / concurrency + latency) for k in range(sends)]
    run = bench.level_run(units, bench.Load(concurrency, sends), epoch_offset=0.0)
    assert run["achieved_concurrency"] == pytest.approx(concurrency)
    assert run["window_requests"] / run["duration_s"] == pytest.approx(concurrency / latency)
    assert len(run["requests"]) == sends - 2 * (concurrency - 1)  # the latency sample stays whole units


@pytest.mark.parametrize("concurrency", [1, 2, 4, 16])
def test_the_fewest_requests_a_level_may_send_leave_its_window_the_stated_minimum(concurrency: int) -> None:
    # Staggered slots (the window's worst case: c - 1 left out at each end), sent the fewest requests
    # the client and the plan accept, and one fewer (refused by both: it would hold one less).
    latency, sends = 1.0, bench.requests_needed(concurrency)
    units = [unit(k * latency / concurrency, k * latency / concurrency + latency) for k in range(sends)]
    run = bench.level_run(units, bench.Load(concurrency, sends), epoch_offset=0.0)
    assert len(run["requests"]) == bench.window_minimum(concurrency) >= max(2, concurrency)
    assert bench.requests_needed(concurrency) <= bench.requests_per_level(concurrency, 1, None)  # the default
    # The plan refuses what the client would (analysis.sweep.request keeps the rule for the plan).
    levels = range(1, 65)
    assert [request.requests_needed(c) for c in levels] == [bench.requests_needed(c) for c in levels]
    assert request.read({"bench_requests": sends, "concurrency": concurrency}).errors == []
    refused = request.read({"bench_requests": sends - 1, "concurrency": concurrency}).errors
    assert f"so at least {sends} per level" in refused[0], refused


def test_a_unit_of_two_turns_serves_two_requests_spread_over_its_time() -> None:
    two_turns = bench.Unit(0.0, 2.0, [(result(), None), (result(), None)])
    assert bench.in_window_requests([two_turns], 1.0, 4.0) == pytest.approx(1.0)
    assert bench.in_window_requests([unit(0.5, 0.5)], 0.0, 1.0) == 1.0  # an instant unit inside counts whole


def test_achieved_concurrency_is_the_time_weighted_mean_in_flight_over_the_window() -> None:
    # c = 3 asked, but a unit is replaced only after a 1 s gap: 3, 3, then 2 in flight.
    units = [unit(0.0, 2.0), unit(0.0, 4.0), unit(0.0, 6.0), unit(3.0, 6.0), unit(5.0, 6.0)]
    load = bench.Load(3, 5)
    assert bench.window(units, load) == (0.0, 6.0)
    run = bench.level_run(units, load, epoch_offset=0.0)
    assert run["achieved_concurrency"] == pytest.approx((2 + 4 + 6 + 3 + 1) / 6.0)
    assert len(run["requests"]) == 5  # nothing drained past the first completion after the last send


def test_an_open_loop_opens_its_window_at_the_first_send_and_never_exceeds_its_cap() -> None:
    work = InFlight(1)  # a barrier of one holds nothing: only counts
    load = bench.Load(3, 40, rate=2000.0)
    units = bench.drive(work, bench.Sampler(RECORDS, random.Random(1)), load, random.Random(2))
    assert len(units) == 40 and work.most <= 3
    assert bench.window(units, load)[0] == units[0].sent


def test_open_loop_arrival_gaps_are_exponential_at_the_rate() -> None:
    # What drive draws between arrivals: a seeded exponential with mean 1 / rate.
    rng = random.Random("42/1/1/arrivals")
    gaps = [rng.expovariate(4.0) for _ in range(4000)]
    assert sum(gaps) / len(gaps) == pytest.approx(0.25, rel=0.05)


def test_work_that_raises_is_raised_instead_of_waited_for() -> None:
    def broken(record: dict[str, Any]) -> Any:
        raise KeyError("prompt")

    with pytest.raises(KeyError):
        bench.drive(broken, bench.Sampler(RECORDS, random.Random(1)), bench.Load(2, 4), random.Random(2))


@pytest.mark.parametrize(("args", "message"), [
    (["--requests", "8", "--duration-s", "5"], "give --requests or --duration-s, not both"),
    (["--requests", "0"], "--requests must be > 0"),
    (["--request-rate", "-1"], "--request-rate must be > 0"),
    (["--requests", "4", "--concurrency", "4"],
     "--requests 4 is too few for concurrency 4: its window leaves out 3 at each end and holds at least 4, "
     "so send at least 10"),
])  # fmt: skip
def test_conflicting_or_bad_load_options_are_usage_errors(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--engine", "llama_cpp", "--url", "http://127.0.0.1:1", "--prompts", "p.jsonl",
            "--max-tokens", "4"]  # fmt: skip
    with pytest.raises(SystemExit):
        bench.parse_args([*base, *args])
    assert message in capsys.readouterr().err


class StandIn(BaseHTTPRequestHandler):
    """llama.cpp's /completion as a few SSE events; holds each request until `parties` are in."""

    barrier: threading.Barrier

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.server.barrier.wait()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for event in ({"content": "a"}, {"content": "b"},
                      {"content": "", "stop": True, "timings": {"predicted_n": 2, "draft_n": 1,
                                                               "draft_n_accepted": 1}}):  # fmt: skip
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()

    def do_GET(self) -> None:
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def stand_in() -> Iterator[str]:
    """URL of a stand-in server whose requests are released 3 at a time."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    server.barrier = threading.Barrier(3, timeout=WAIT_S)  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_main_measures_each_level_in_its_window_and_records_how(stand_in: str, tmp_path: Path) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    out = tmp_path / "out.json"
    # No interval stops these levels (--ci-pct 0): the stand-in's rates are timing noise.
    argv = ["--engine", "llama_cpp", "--url", stand_in, "--prompts", str(prompts), "--max-tokens", "2",
            "--warmup", "0", "--repeats", "2", "--concurrency", "3", "--output", str(out),
            "--ci-pct", "0"]  # fmt: skip
    assert bench.main(argv) == 0
    doc = json.loads(out.read_text())
    settings = from_dict(BenchmarkSettings, doc["benchmark"])
    how = (settings.requests, settings.duration_s, settings.request_rate, settings.seed)
    assert how == (None, None, None, 42)
    # --ci-pct 0: every level sent its count, no stopping rule to record.
    assert (settings.ci_pct, settings.min_requests, settings.level_budget_s) == (None, None, None)
    runs = [from_dict(Run, r) for r in doc["runs"]]
    assert [(r.concurrency, r.repeat) for r in runs] == [(3, 1), (3, 2)]
    for run in runs:
        assert run.requests_sent == 12  # 4 x c, more than the 4 prompts
        assert len(run.requests) == 12 - 2 * 2 and all(q.error is None for q in run.requests)
        # The barrier of 3 proves c in flight; more than c - 1 on average: never stuck one short.
        assert run.achieved_concurrency is not None and run.achieved_concurrency > 2.0
        assert run.window_start_at is not None and run.window_end_at is not None
        assert run.window_end_at - run.window_start_at == pytest.approx(run.duration_s, abs=1e-5)
        assert run.spec.drafted == 8
