"""The server's own count of running and queued requests (roles/benchmark/files/specsweep_serverload.py).

The parser reads each engine's real exposition: llama.cpp's captured from the pinned llama-server
(xllamacpp) with 1 slot and 3 requests, and SGLang 0.5.23's made by prometheus_client from the
wheel's own gauge definitions and labels (fixtures/serverload/capture_sglang.py says how).
"""

from __future__ import annotations

import ast
import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import specsweep_serverload as sl

from analysis.facts.schema import Run, ServerLoad, from_dict

FIX = Path(__file__).resolve().parent / "fixtures" / "serverload"
SOURCE = Path(sl.__file__)


def text(name: str) -> str:
    return (FIX / name).read_text()


def test_the_sampler_is_python_3_9_syntax() -> None:
    ast.parse(SOURCE.read_text(), feature_version=(3, 9))


@pytest.mark.parametrize(
    ("engine", "name", "expected"),
    [
        ("llama_cpp", "llama_cpp_1slot_3requests.txt", (1.0, 2.0)),  # 1 slot busy, 2 deferred
        ("llama_cpp", "llama_cpp_idle.txt", (0.0, 0.0)),
        ("sglang", "sglang_tp8.txt", (48.0, 16.0)),  # the speculative cap of 48 at level 64
        # Two data-parallel schedulers summed; the per-priority breakdown is not counted twice.
        ("sglang", "sglang_dp2_priority.txt", (48.0, 4.0)),
    ],
)
def test_counts_read_each_engines_real_exposition(engine: str, name: str, expected: tuple) -> None:
    assert sl.counts(engine, text(name)) == expected


def test_the_parser_keeps_labels_and_skips_comments_and_other_metrics() -> None:
    found = sl.parse_prometheus(text("sglang_dp2_priority.txt"))
    series = found["sglang:num_queue_reqs"]
    assert len(series) == 6 and "# HELP" not in str(found)
    labels, value = series[0]
    assert labels == {"dp_rank": "0", "engine_type": "unified", "model_name": "moonshotai/Kimi-K2.5",
                      "moe_ep_rank": "0", "pp_rank": "0", "priority": "", "tp_rank": "0"}  # fmt: skip
    assert value == 3.0
    assert found["sglang:time_to_first_token_seconds_bucket"][-1] == (
        {"le": "+Inf", "model_name": "moonshotai/Kimi-K2.5"},
        1.0,
    )
    only = sl.parse_prometheus(text("sglang_tp8.txt"), ("sglang:num_running_reqs",))
    assert list(only) == ["sglang:num_running_reqs"]


def test_label_values_may_hold_escapes_braces_and_commas() -> None:
    line = 'sglang:num_running_reqs{model_name="a \\"b\\", {c}\\\\d",tp_rank="0"} 7 1712345678000\n'
    assert sl.parse_prometheus(line) == {
        "sglang:num_running_reqs": [({"model_name": 'a "b", {c}\\d', "tp_rank": "0"}, 7.0)]
    }


def test_a_missing_gauge_or_unreadable_text_is_no_figure() -> None:
    assert sl.counts("llama_cpp", "") is None
    assert sl.counts("llama_cpp", "llamacpp:requests_processing 1\n") is None  # no queued gauge
    assert sl.counts("sglang", "<html>404</html>\nsglang:num_running_reqs oops\n") is None
    assert sl.counts("llama_cpp", "llamacpp:requests_processing NaN\nllamacpp:requests_deferred 0\n") is None


def test_the_window_keeps_only_samples_inside_it() -> None:
    # (time, running, queued): the ramp (t=1) and the drain (t=9) are outside [2, 8].
    samples = [(1.0, 1.0, 0.0), (2.0, 48.0, 16.0), (5.0, 48.0, 15.0), (8.0, 47.0, 14.0), (9.0, 3.0, 0.0)]
    assert sl.summarize(samples, 2.0, 8.0) == {
        "samples": 3, "running_mean": pytest.approx(143 / 3), "running_median": 48.0, "running_max": 48.0,
        "queued_mean": 15.0, "queued_max": 16.0,
    }  # fmt: skip
    assert sl.summarize(samples, 9.5, 10.0) is None  # a window shorter than the interval


def test_the_probe_samples_until_stopped_and_its_summary_fits_the_schema() -> None:
    reads = iter([text("llama_cpp_1slot_3requests.txt"), None, "garbage", text("llama_cpp_idle.txt")])
    clock = iter(float(t) for t in range(100))
    probe = sl.Probe("llama_cpp", "127.0.0.1", 1, {}, interval_s=0.0, clock=lambda: next(clock))

    def read() -> str | None:
        got = next(reads)
        if got is not None and "requests_processing 0" in got:
            probe._stop.set()  # the last read: stop() arrives while it is under way
        return got

    probe.read = read
    probe._loop(probe._stop, probe.samples)  # the thread's body, run here: no timing involved
    assert probe.samples == [(0.5, 1.0, 2.0)]  # stamped midway; failures and the late read add nothing
    found = probe.window(0.0, 10.0)
    assert found is not None
    load = from_dict(ServerLoad, found)
    assert (load.running_metric, load.queued_metric) == (
        "llamacpp:requests_processing",
        "llamacpp:requests_deferred",
    )
    assert (load.samples, load.running_max, load.queued_max, load.interval_s) == (1, 1.0, 2.0, 0.0)
    assert probe.window(None, 10.0) is None  # a run without a window has no server figure


@pytest.fixture
def metrics_server() -> Iterator[tuple[int, list[int]]]:
    """A local HTTP server answering /metrics with the llama.cpp capture, or with the status asked."""
    status = [200]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = text("llama_cpp_1slot_3requests.txt").encode() if status[0] == 200 else b"no metrics"
            self.send_response(status[0])
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], status
    finally:
        server.shutdown()
        server.server_close()


def test_get_reads_metrics_and_a_server_without_them_gives_none(
    metrics_server: tuple[int, list[int]],
) -> None:
    port, status = metrics_server
    probe = sl.Probe("llama_cpp", "127.0.0.1", port, {})
    assert sl.counts("llama_cpp", probe._get() or "") == (1.0, 2.0)
    status[0] = 501  # llama-server without --metrics
    assert probe._get() is None


def test_get_from_a_port_nothing_listens_on_gives_none() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert sl.Probe("llama_cpp", "127.0.0.1", port, {})._get() is None


def test_a_run_without_server_load_still_reads() -> None:
    old = {"repeat": 1, "concurrency": 1, "duration_s": 1.0, "requests": []}
    assert from_dict(Run, old).server_load is None
