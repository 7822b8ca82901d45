"""The server's own count of running and queued requests over one run (the fact's Run.server_load).

Standard library only, Python 3.9+: copied beside specsweep_bench.py, which starts a `Probe` before
a level and asks it, after, for the figures inside the level's measured window. The client counts
what it sent; the server may run fewer and queue the rest (SGLang caps running requests at 48 with
speculation, llama-server has -np slots), which only the server can say.

Where the figures come from: each engine's Prometheus endpoint, GET /metrics on the server's port,
its running and queued gauges as specsweep_bench_engines.py names them (with their sources). An
engine that gives no per-request speculative counters in its stream (vLLM) has its run's SpecStats
from /metrics too: the difference, over the measured window, of the counters that file names. They
count every request the server verified in the window (the ramp and drain ones too), where the
stream counters of the other engines count the requests wholly inside it.

Sampling must not disturb the measurement: one thread, a read every INTERVAL_S with a short
timeout, and any failure (no metrics flag, a refused connection, text it cannot parse) is a missing
sample, never an error: a run without samples has no server figure.
"""

from __future__ import annotations

import http.client
import math
import re
import statistics
import threading
import time
from typing import Any, Callable

from specsweep_bench_engines import ENGINES

INTERVAL_S = 0.5  # between reads: 2 small GETs a second, next to the run's own requests
TIMEOUT_S = 2.0  # per read: a server too busy to answer in time gives no sample, not a stall
_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\})?\s+(\S+)')
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
Sample = tuple[dict[str, str], float]  # (labels, value)


def parse_prometheus(text: str, names: tuple = ()) -> dict[str, list[Sample]]:
    """The samples of Prometheus' text format by metric name (only `names`, where given): each a
    (labels, value) pair; comments, other names and lines it cannot read are skipped."""
    out: dict[str, list[Sample]] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if not match or (names and match.group(1) not in names):
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        labels = {k: _unescape(v) for k, v in _LABEL.findall(match.group(2) or "")}
        out.setdefault(match.group(1), []).append((labels, value))
    return out


def _unescape(value: str) -> str:
    """A label value as written: the format escapes backslash, double quote and newline."""
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def total(samples: list[Sample]) -> float | None:
    """One gauge's value for the whole server: the sum over its series (a scheduler each), the
    per-priority breakdown (a priority label other than "") left out; None if there is none."""
    values = [v for labels, v in samples if labels.get("priority", "") == "" and math.isfinite(v)]
    return sum(values) if values else None


def counts(engine: str, text: str) -> tuple[float, float] | None:
    """(running, queued) from one /metrics text of `engine`; None where either gauge is missing."""
    running, queued = ENGINES[engine].gauges
    found = parse_prometheus(text, (running, queued))
    pair = total(found.get(running, [])), total(found.get(queued, []))
    return None if None in pair else (pair[0], pair[1])


def spec_counters(engine: str, text: str) -> tuple[float, float, float, list[float]] | None:
    """(steps, drafted, accepted, accepted by position) summed over the server's engine cores from
    one /metrics text; None where the engine has no such counters or a count is missing."""
    names = ENGINES[engine].spec_counters
    if names is None:
        return None
    found = parse_prometheus(text, names)
    steps, drafted, accepted = (total(found.get(n, [])) for n in names[:3])
    by_position: dict[int, float] = {}
    for labels, value in found.get(names[3], []):
        if labels.get("position", "").isdigit() and math.isfinite(value):
            position = int(labels["position"])
            by_position[position] = by_position.get(position, 0.0) + value
    if steps is None or drafted is None or accepted is None:
        return None
    return steps, drafted, accepted, [by_position.get(k, 0.0) for k in range(len(by_position))]


def spec_window(samples: list[tuple[float, tuple]], opens: float, closes: float) -> dict | None:
    """The SpecStats dict of the counters' growth between the first and the last sample taken in
    [opens, closes]; None with fewer than two samples there, or when they did not grow (a restart)."""
    inside = [c for t, c in samples if opens <= t <= closes]
    if len(inside) < 2:
        return None
    (s0, d0, a0, p0), (s1, d1, a1, p1) = inside[0], inside[-1]
    steps, drafted, accepted = int(s1 - s0), int(d1 - d0), int(a1 - a0)
    if min(steps, drafted, accepted) < 0:
        return None
    # A draft's tokens are accepted as a prefix: position k accepted in a step means 0..k-1 were too,
    # so steps that accepted exactly k = (accepted at k-1) - (accepted at k), position -1 being all.
    grew = [int(b - (p0[k] if k < len(p0) else 0.0)) for k, b in enumerate(p1)]
    reach = [steps, *grew]
    histogram = [reach[k] - (reach[k + 1] if k + 1 < len(reach) else 0) for k in range(len(reach))]
    return {"drafted": drafted, "accepted": accepted, "verify_steps": steps,
            # vLLM's mean acceptance length, the bonus token counted (SpecDecodingProm's docstring).
            "accept_length": 1 + accepted / steps if steps else None,
            "accept_rate": accepted / drafted if drafted else None,
            "accepted_histogram": histogram if grew and steps else None}  # fmt: skip


def summarize(samples: list[tuple[float, float, float]], opens: float, closes: float) -> dict | None:
    """The ServerLoad dict of the (time, running, queued) samples taken in [opens, closes], or None
    when none was (no metrics, or a window shorter than the interval)."""
    inside = [(r, q) for t, r, q in samples if opens <= t <= closes]
    if not inside:
        return None
    running, queued = [r for r, _ in inside], [q for _, q in inside]
    return {"samples": len(inside), "running_mean": statistics.fmean(running),
            "running_median": statistics.median(running), "running_max": max(running),
            "queued_mean": statistics.fmean(queued), "queued_max": max(queued)}  # fmt: skip


class Probe:
    """Reads the server's counts every `interval_s` on its own thread between `start()` and
    `stop()`; `window(opens, closes)` is then the ServerLoad dict of that window (epoch seconds)."""

    def __init__(self, engine: str, host: str, port: int, headers: dict[str, str],
                 interval_s: float = INTERVAL_S, timeout_s: float = TIMEOUT_S,
                 read: Callable[[], str | None] | None = None,
                 clock: Callable[[], float] = time.time):  # fmt: skip
        self.engine, self.interval_s, self.clock = engine, interval_s, clock
        self.host, self.port, self.headers, self.timeout_s = host, port, headers, timeout_s
        self.read = read or self._get
        self.samples: list[tuple[float, float, float]] = []
        self.spec_samples: list[tuple[float, tuple]] = []  # (time, spec_counters) where the engine has them
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def _get(self) -> str | None:
        """GET /metrics; None on any failure (a server without metrics answers 404 or 501)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        try:
            conn.request("GET", "/metrics", headers=self.headers)
            resp = conn.getresponse()
            body = resp.read()
            return body.decode("utf-8", errors="replace") if resp.status == 200 else None
        except (OSError, http.client.HTTPException):
            return None
        finally:
            conn.close()

    def _loop(self, stop: threading.Event, samples: list[tuple[float, float, float]]) -> None:
        """Read until `stop` is set (its own event and list: a read outliving stop() adds nothing)."""
        while True:
            sent = self.clock()
            text = self.read()
            got = counts(self.engine, text) if text is not None else None
            spec = spec_counters(self.engine, text) if text is not None else None
            with self._lock:
                if stop.is_set():
                    return
                at = (sent + self.clock()) / 2  # stamped midway: read somewhere in the round trip
                if got is not None:
                    samples.append((at, *got))
                if spec is not None:
                    self.spec_samples.append((at, spec))
            if stop.wait(self.interval_s):  # the sampling cadence; stop() ends the wait
                return

    def start(self) -> None:
        """Begin sampling into a fresh list."""
        self._stop, self.samples, self.spec_samples = threading.Event(), [], []
        threading.Thread(target=self._loop, args=(self._stop, self.samples), daemon=True).start()

    def stop(self) -> None:
        """Stop sampling at once: no sample is added after this returns, and a read under way is
        not waited for (it ends within its timeout and is dropped)."""
        with self._lock:
            self._stop.set()

    def window(self, opens: Any, closes: Any) -> dict | None:
        """The ServerLoad dict of the samples inside [opens, closes] (None: no server figure)."""
        if not isinstance(opens, (int, float)) or not isinstance(closes, (int, float)):
            return None
        found = summarize(self.samples, opens, closes)
        if found is not None:
            running, queued = ENGINES[self.engine].gauges
            found.update({"interval_s": self.interval_s, "running_metric": running, "queued_metric": queued})
        return found

    def spec(self, opens: Any, closes: Any) -> dict | None:
        """The SpecStats dict of the window from the server's own counters (engines with spec_counters;
        None for the others, and where the window holds fewer than two samples)."""
        if not isinstance(opens, (int, float)) or not isinstance(closes, (int, float)):
            return None
        return spec_window(self.spec_samples, opens, closes)
