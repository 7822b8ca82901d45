"""specsweep on-host benchmark client: streams greedy completions, prints one JSON document.

Standard library only, Python 3.9+: it runs with whatever python3 the host has."""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import http.client
import json
import math
import os
import queue
import random
import signal
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, Optional

import specsweep_interference  # beside this script on the host (the benchmark role copies them)
import specsweep_serverload
from specsweep_bench_engines import ENGINES, StreamError, check_error, integer, integers, llama_counts

CLIENT = "specsweep-bench/1"
DONE = object()  # the SSE `data: [DONE]` terminator
Doc = dict[str, Any]


def parse_sse_line(line: bytes) -> Any:
    """One SSE line -> parsed JSON payload, DONE, or None for blank/other lines."""
    text = line.decode("utf-8", errors="replace").strip()
    if text.startswith("error:"):
        # llama.cpp sends a mid-stream failure as an `error:` event, not `data:`.
        raise StreamError(text[6:].strip()[:500])
    if not text.startswith("data:"):
        return None
    payload = text[5:].strip()
    if payload == "[DONE]":
        return DONE
    try:
        return json.loads(payload)
    except ValueError as exc:
        raise StreamError(f"bad JSON in stream: {payload[:200]}") from exc


def chat_body(engine: str, messages: list[Doc], max_tokens: int) -> Doc:
    """/v1/chat/completions body: the server applies the model's own chat template; greedy, fixed
    length, streamed, with the engine's per-request counters asked for."""
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}  # fmt: skip
    return {**body, **ENGINES[engine].chat}


def chat_feed(event: Doc, state: Doc) -> tuple[str, Doc | None]:
    """OpenAI chat chunk -> (new text, the counters so far once usage or timings came).

    llama.cpp puts `timings` (drafts) on its last chunk; SGLang sends `usage` in a chunk of its own and
    its spec counters in `sglext.spec_tokens_details` (older: `usage.spec_tokens_details`)."""
    check_error(event)
    choices = event.get("choices") or []
    first = choices[0] if choices and isinstance(choices[0], dict) else {}
    delta = (first.get("delta") or {}).get("content") or ""
    usage, timings = event.get("usage") or {}, event.get("timings") or {}
    spec = (event.get("sglext") or {}).get("spec_tokens_details") or usage.get("spec_tokens_details") or {}
    counts = state.setdefault("counts", {})
    if timings:
        counts.update(llama_counts(timings, integer(timings.get("predicted_n"))))
    if usage:
        counts.setdefault("output_tokens", integer(usage.get("completion_tokens")))
        counts.setdefault("input_tokens", integer(usage.get("prompt_tokens")))
    if spec:
        counts.update(drafted=integer(spec.get("spec_num_proposed_drafts")),
                      accepted=integer(spec.get("spec_num_correct_drafts")),
                      verify_steps=integer(spec.get("spec_verify_ct")),
                      accepted_histogram=integers(spec.get("spec_correct_drafts_histogram")))  # fmt: skip
    if counts.get("output_tokens") is None:
        return delta, None
    return delta, {"drafted": None, "accepted": None, "verify_steps": None, **counts}


CHAT_PATH = "/v1/chat/completions"  # every engine, with the model's own template


def consume_stream(
    engine: str,
    lines: Iterable[bytes],
    t_send: float,
    clock: Callable[[], float] = time.perf_counter,
    deadline: float | None = None,
    chat: bool = False,
) -> tuple[Doc, Doc]:
    """Read one response stream -> (RequestResult fields but prompt_id, counters)."""
    feed, state = chat_feed if chat else ENGINES[engine].feed, {}
    stamps: list[float] = []
    parts: list[str] = []
    final: Doc | None = None
    for line in lines:
        now = clock()
        if deadline is not None and now > deadline:
            raise TimeoutError("request exceeded --timeout-s")
        event = parse_sse_line(line)
        if event is DONE:
            break
        if not isinstance(event, dict):
            continue
        delta, counts = feed(event, state)
        if delta:
            stamps.append(now)
            parts.append(delta)
        if counts is not None:
            final = counts
            if ENGINES[engine].final_is_last and not chat:
                break  # no [DONE] follows (llama.cpp's /completion): the final event is the last one
    e2e = clock() - t_send
    if final is None:
        raise StreamError("stream ended before the final event")
    tokens = final["output_tokens"] or 0
    span = stamps[-1] - stamps[0] if stamps else 0.0
    return {
        "output_tokens": tokens,
        "ttft_s": stamps[0] - t_send if stamps else e2e,
        "e2e_s": e2e,
        "decode_tps": (tokens - 1) / span if tokens >= 2 and span > 0 else None,
        # Raw gaps: one speculative step may arrive as one chunk or as a burst.
        "itl_s": [stamps[i] - stamps[i - 1] for i in range(1, len(stamps))],
        "text": "".join(parts),
        "error": None,
        "input_tokens": final.get("input_tokens"),
    }, final


def aggregate_spec(counters: list[Doc]) -> Doc:
    """SpecStats dict summed over one run's successful requests."""
    sums: dict[str, int | None] = {}
    for key in ("drafted", "accepted", "verify_steps"):
        values = [c[key] for c in counters if c.get(key) is not None]
        sums[key] = sum(values) if values else None
    drafted, accepted, steps = sums["drafted"], sums["accepted"], sums["verify_steps"]
    verified = [c.get("output_tokens") or 0 for c in counters if c.get("verify_steps")]
    # SGLang's verify steps by drafts accepted ([k]: steps that accepted k), summed position-wise.
    histograms = [c["accepted_histogram"] for c in counters if c.get("accepted_histogram")]
    width = max((len(h) for h in histograms), default=0)
    return {
        **sums,
        "accept_length": sum(verified) / steps if steps else None,
        "accept_rate": accepted / drafted if drafted and accepted is not None else None,
        "accepted_histogram": [sum(h[k] for h in histograms if k < len(h)) for k in range(width)] or None,
    }


class Client:
    """HTTP access to one engine's server."""

    def __init__(self, engine: str, url: str, api_key: str | None, timeout_s: float):
        """Remember where and how to talk to the server."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise SystemExit(f"--url must look like http://127.0.0.1:PORT, got {url!r}")
        self.engine, self.timeout_s = engine, timeout_s
        self.host, self.port = parts.hostname, parts.port or 80
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        """A fresh connection per request, so concurrent threads never share one."""
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def get_json(self, path: str) -> Any:
        """GET path as JSON; None on any failure (server info is best effort)."""
        conn = self._connect(min(self.timeout_s, 30.0))
        try:
            conn.request("GET", path, headers=self.headers)
            resp = conn.getresponse()
            return json.loads(resp.read()) if resp.status == 200 else None
        except (OSError, ValueError, http.client.HTTPException):
            return None
        finally:
            conn.close()

    def complete(self, prompt_id: str, prompt: str, max_tokens: int) -> tuple[Doc, Any]:
        """One streamed raw completion -> (RequestResult dict, counters or None on error)."""
        engine = ENGINES[self.engine]
        return self._stream(prompt_id, engine.path, engine.body(prompt, max_tokens), chat=False)

    def chat(self, prompt_id: str, messages: list[Doc], max_tokens: int) -> tuple[Doc, Any]:
        """One streamed chat completion (the model's own template) -> (RequestResult dict, counters)."""
        return self._stream(prompt_id, CHAT_PATH, chat_body(self.engine, messages, max_tokens), chat=True)

    def _stream(self, prompt_id: str, path: str, payload: Doc, chat: bool) -> tuple[Doc, Any]:
        """POST one streamed request and time it; an error is a result, not an exception."""
        body = json.dumps(payload).encode()
        conn = self._connect(self.timeout_s)
        t_send = time.perf_counter()
        try:
            conn.request("POST", path, body=body, headers=self.headers)
            resp = conn.getresponse()
            if resp.status != 200:
                detail = resp.read(300).decode(errors="replace")
                raise StreamError(f"HTTP {resp.status}: {detail}")
            deadline = t_send + self.timeout_s
            result, counts = consume_stream(self.engine, resp, t_send, deadline=deadline, chat=chat)
            return {"prompt_id": prompt_id, **result}, counts
        except (OSError, ValueError, StreamError, http.client.HTTPException) as exc:
            error = f"{type(exc).__name__}: {exc}"[:500]
            return {"prompt_id": prompt_id, "output_tokens": 0, "ttft_s": 0.0,
                    "e2e_s": time.perf_counter() - t_send, "decode_tps": None, "itl_s": [],
                    "text": "", "error": error}, None  # fmt: skip
        finally:
            conn.close()


# A unit of work is one record of the workload: one completion (one result) or one conversation
# (a result per turn). The scheduler calls work(record) and keeps the level's load; what a unit
# sends is the workload's business (the seam: work(record) -> [(RequestResult dict, counters)]).
Outcomes = list[tuple[Doc, Optional[Doc]]]
Work = Callable[[Doc], Outcomes]
REQUESTS_PER_LEVEL = 4  # a level sends at least this many times its concurrency by default


def window_minimum(concurrency: int) -> int:
    """Requests a closed-loop level's measured window holds at least: one per slot, and two."""
    return max(2, concurrency)


def requests_needed(concurrency: int) -> int:
    """Requests a closed-loop level must send for its window to hold `window_minimum`: the window
    leaves out the first c - 1 sent (the ramp) and the last c - 1 done (the drain). The default,
    REQUESTS_PER_LEVEL x c, is always enough. The plan checks the same (analysis.sweep.request)."""
    return window_minimum(concurrency) + 2 * (concurrency - 1)


class Load(NamedTuple):
    """How one level is driven: `concurrency` in flight (closed loop), or Poisson arrivals at `rate`
    per second with at most `concurrency` in flight (open loop: bench_serving's --request-rate with
    --max-concurrency); `requests` units sent, or as many as start within `duration_s`; with `stop`,
    fewer once the level has measured enough."""

    concurrency: int
    requests: int
    duration_s: float | None = None
    rate: float | None = None
    stop: Stop | None = None


class LaunchCost(NamedTuple):
    """What another launch of the config would cost and tell: its seconds (load and the suite's
    work around it), the launch-to-launch CV of a launch's mean tok/s (a fraction), and the repeats
    a level's requests are split over."""

    cost_s: float
    cv: float
    repeats: int


class Stop(NamedTuple):
    """When a level stops sending before its `requests`: once the 95% CI half-width of its units'
    mean tok/s is within `ci_pct` % of it (0: never), or with `launch`, once it sent the units worth
    sending in one launch (worth_sending); after at least `min_requests` units; and after `budget_s`
    seconds whatever the rule says (per repeat: the level's budget over its repeats). A closed loop
    sends 2 x c at least (its window)."""

    ci_pct: float
    min_requests: int
    budget_s: float | None
    launch: LaunchCost | None = None


def t975(df: int) -> float:
    """The t distribution's 0.975 quantile: its expansion in 1/df around the normal's (Fisher and
    Cornish), within 0.2% of the tables for df >= 3 (the rule needs 3 units at least)."""
    z = 1.959964
    terms = ((z**3 + z) / 4, (5 * z**5 + 16 * z**3 + 3 * z) / 96,
             (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
             (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160)  # fmt: skip
    return z + sum(term / df**k for k, term in enumerate(terms, 1))


def mean_sd(rates: list[float]) -> tuple[float, float]:
    """The mean of `rates` (two or more) and their sample standard deviation."""
    mean = sum(rates) / len(rates)
    return mean, math.sqrt(sum((r - mean) ** 2 for r in rates) / (len(rates) - 1))


def settled(rates: list[float], ci_pct: float) -> bool:
    """True when the mean of `rates` is known to within ci_pct % (95% CI half-width)."""
    n = len(rates)
    if ci_pct <= 0 or n < 3:
        return False
    mean, sd = mean_sd(rates)
    return mean > 0 and t975(n - 1) * sd / math.sqrt(n) <= ci_pct / 100 * mean


def worth_sending(launch: LaunchCost, unit_s: float, cv: float) -> float:
    """Units one repeat of a level is worth in a launch (Kalibera & Jones's allocation of repetitions
    between two levels, launches and requests): sqrt(launch cost / unit cost) x request CV / launch
    CV over the level's repeats. Past it, a unit narrows the config's interval less per second than
    another launch would; before it, more per second. A unit costs `unit_s` (its share of the level's
    time), its tok/s spreads by `cv`."""
    return math.sqrt(launch.cost_s / unit_s) * cv / launch.cv / launch.repeats


def enough(stop: Stop | None, concurrency: int, elapsed: float, sent: int, done: list[Unit]) -> bool:
    """Whether a level that sent `sent` units, `done` of them finished (in send order), has measured
    enough to stop sending.

    The ramp's first c - 1 units ran with fewer in flight and are left out, as from the figures. The
    records are drawn without replacement (Sampler), so the units sent before a stop are a fair sample.
    """
    if stop is None or sent < 2 * concurrency:
        return False
    if stop.budget_s is not None and elapsed >= stop.budget_s:
        return True
    if sent < stop.min_requests:
        return False
    rates = [
        sum(r["output_tokens"] for r, _ in u.outcomes if r["error"] is None) / (u.done - u.sent)
        for u in done[concurrency - 1 :]
        if u.done > u.sent
    ]
    if stop.launch is None:
        return settled(rates, stop.ci_pct)
    if len(rates) < 3:
        return False
    mean, sd = mean_sd(rates)
    cv = sd / mean if mean > 0 else 0.0
    return len(rates) >= worth_sending(stop.launch, elapsed / len(done), cv)


class Unit(NamedTuple):
    """One finished unit of work: when it was sent and when done (one clock), and its outcomes."""

    sent: float
    done: float
    outcomes: Outcomes


class Sampler:
    """The workload's records in seeded shuffled passes: each record once per pass, so N requests
    cover the set evenly, and every config is sent the same sequence for the same seed."""

    def __init__(self, records: list[Doc], rng: random.Random):
        """Draw from `records` with `rng`."""
        self.records, self.rng = records, rng
        self.order: list[int] = []

    def __call__(self) -> Doc:
        """The next record."""
        if not self.order:
            self.order = list(range(len(self.records)))
            self.rng.shuffle(self.order)
        return self.records[self.order.pop()]


def drive(work: Work, pick: Callable[[], Doc], load: Load, rng: random.Random,
          clock: Callable[[], float] = time.perf_counter) -> list[Unit]:  # fmt: skip
    """Run one level -> every unit sent, in the order sent. Closed loop: a finished unit is replaced
    at once until `requests` were sent (or `duration_s` has passed). Open loop: units arrive at
    seeded Poisson times and wait for a free slot (bench_serving's semaphore)."""
    finished: queue.Queue = queue.Queue()

    def job(index: int, record: Doc) -> None:
        try:
            outcomes = work(record)
        except BaseException as exc:  # handed to the loop, which would otherwise wait for ever
            finished.put((index, clock(), exc))
            return
        finished.put((index, clock(), outcomes))

    sent: list[float] = []
    units: dict[int, Unit] = {}
    start = clock()

    def more(at: float, count: int) -> bool:
        if load.duration_s is not None:
            return at - start < load.duration_s
        done = [units[i] for i in sorted(units)]
        return count < load.requests and not enough(load.stop, load.concurrency, at - start, count, done)

    arrived, next_arrival = 0, start  # open loop only

    def ready() -> bool:
        return more(clock(), len(sent)) if load.rate is None else len(sent) < arrived

    with concurrent.futures.ThreadPoolExecutor(max_workers=load.concurrency) as pool:
        while True:
            now = clock()
            while load.rate is not None and next_arrival is not None and next_arrival <= now:
                if more(next_arrival, arrived):
                    arrived, next_arrival = arrived + 1, next_arrival + rng.expovariate(load.rate)
                else:
                    next_arrival = None
            while len(sent) - len(units) < load.concurrency and ready():
                sent.append(clock())
                pool.submit(job, len(sent) - 1, pick())
            if len(sent) == len(units) and (load.rate is None or next_arrival is None):
                return [units[i] for i in range(len(sent))]
            wait = None if load.rate is None or next_arrival is None else max(0.0, next_arrival - clock())
            try:
                index, done, outcomes = finished.get(timeout=wait)
            except queue.Empty:
                continue
            if isinstance(outcomes, BaseException):
                raise outcomes
            units[index] = Unit(sent[index], done, outcomes)


def _overlap(lo: float, hi: float, a: float, b: float) -> float:
    """Length of [lo, hi] inside [a, b]."""
    return max(0.0, min(hi, b) - max(lo, a))


def window(units: list[Unit], load: Load) -> tuple[float, float]:
    """The measured window of a level: (opens, closes) on the units' clock.

    Opens when the level is reached: at the c-th send in a closed loop (c in flight), at the first
    send in an open loop (arrivals do not wait for the server). Closes at the first completion after
    the last send: from then on nothing replaces what finishes and the load drains.
    """
    sends = sorted(u.sent for u in units)
    opens = sends[min(load.concurrency, len(sends)) - 1] if load.rate is None else sends[0]
    closes = min((u.done for u in units if u.done > sends[-1]), default=max(u.done for u in units))
    return opens, closes


def _spread(count: float, lo: float, hi: float, opens: float, closes: float) -> float:
    """The share of `count`, spread evenly over [lo, hi], that falls inside [opens, closes]."""
    if hi > lo:
        return count * _overlap(lo, hi, opens, closes) / (hi - lo)
    return count if opens <= lo <= closes else 0.0


def in_window_tokens(units: list[Unit], opens: float, closes: float) -> float:
    """Output tokens generated inside the window: each unit's tokens spread evenly from its first
    token to its end (the throughput of the window, whatever units straddle its edges)."""
    total = 0.0
    for u in units:
        tokens = sum(r["output_tokens"] for r, _ in u.outcomes if r["error"] is None)
        first = u.sent + (u.outcomes[0][0]["ttft_s"] if u.outcomes else 0.0)
        total += _spread(tokens, first, u.done, opens, closes)
    return total


def in_window_requests(units: list[Unit], opens: float, closes: float) -> float:
    """Requests served inside the window: each unit's requests spread evenly from its send to its
    end. Counting only the units wholly inside drops the c - 1 straddling each edge, which reads a
    closed loop's request rate low by about 2(c - 1) units per window; this keeps Little's law
    (rate = mean in flight / mean latency)."""
    return sum(_spread(len(u.outcomes), u.sent, u.done, opens, closes) for u in units)


def level_run(units: list[Unit], load: Load, epoch_offset: float) -> Doc:
    """Run dict without `repeat`: the figures of the units sent and done inside the window.

    The units sent before the window opens (the first c - 1 of a closed loop: the ramp) and those
    done after it closes (the last c - 1: the drain) load the server but are left out of the
    figures; `achieved_concurrency` is the time-weighted mean of units in flight over the window.
    """
    opens, closes = window(units, load)
    length = closes - opens
    counted = [u for u in units if u.sent >= opens and u.done <= closes]
    outcomes = [o for u in counted for o in u.outcomes]
    in_flight = sum(_overlap(u.sent, u.done, opens, closes) for u in units)
    return {
        "concurrency": load.concurrency,
        "duration_s": length,
        "requests": [r for r, _ in outcomes],
        "spec": aggregate_spec([c for _, c in outcomes if c is not None]),
        "achieved_concurrency": in_flight / length if length > 0 else None,
        "requests_sent": sum(len(u.outcomes) for u in units),
        "window_start_at": opens + epoch_offset,
        "window_end_at": closes + epoch_offset,
        "window_output_tokens": in_window_tokens(units, opens, closes),
        "window_requests": in_window_requests(units, opens, closes),
    }


def level_key(seed: int, concurrency: int, repeat: int) -> str:
    """The seed of one (level, repeat): the same on every config, so each is sent the same records."""
    return f"{seed}/{concurrency}/{repeat}"


def record_sampler(records: list[Doc], key: str) -> Sampler:
    """The records of one (level, repeat), as both clients draw them."""
    return Sampler(records, random.Random(f"{key}/records"))


def run_level(work: Work, records: list[Doc], load: Load, key: str) -> Doc:
    """One measured level over records sampled with `key` -> Run dict without `repeat`."""
    # Two streams: the records sent must not depend on how arrivals and sends interleave.
    pick = record_sampler(records, key)
    epoch_offset = time.time() - time.perf_counter()
    units = drive(work, pick, load, random.Random(f"{key}/arrivals"))
    return level_run(units, load, epoch_offset)


def requests_per_level(concurrency: int, records: int, requests: int | None) -> int:
    """Units a level sends: as asked, else REQUESTS_PER_LEVEL x its concurrency and at least one
    pass over the records."""
    return requests if requests is not None else max(REQUESTS_PER_LEVEL * concurrency, records)


def make_work(client: Client, max_tokens: int) -> Work:
    """work(record) -> [(RequestResult dict, counters or None)]: one unit of traffic, every turn of it.

    A completion record is one request; a chat record is its conversation, each follow-up sent after
    the answer to the turn before (MT-Bench's second turn), so it yields a result per turn. The
    record's own `max_tokens` (output_len=dataset) beats the run's. An operator's private record keeps
    no response text."""

    def work(record: Doc) -> Outcomes:
        limit = record.get("max_tokens") or max_tokens
        if "messages" not in record:
            return [client.complete(record["id"], record["prompt"], limit)]
        messages = list(record["messages"])
        out = [client.chat(record["id"], messages, limit)]
        for turn, followup in enumerate(record.get("followups") or [], 2):
            if out[-1][0]["error"]:
                break  # no answer to follow up on
            messages += [
                {"role": "assistant", "content": out[-1][0]["text"]},
                {"role": "user", "content": followup},
            ]
            out.append(client.chat(f"{record['id']}/{turn}", messages, limit))
        if record.get("private"):
            out = [({**result, "text": ""}, counts) for result, counts in out]
        return out

    return work


def server_info(client: Client) -> tuple[str | None, Doc]:
    """(engine_version, a few server facts); never raises."""
    return ENGINES[client.engine].info(client.get_json)


def load_prompts(path: str) -> tuple[list[Doc], str]:
    """Records from a JSONL file, and the sha256 of its bytes: {"id", "prompt"} (a raw completion) or
    {"id", "messages", "followups"} (a chat), each with an optional "workload" (analysis.workloads)."""
    with open(path, "rb") as fh:
        raw = fh.read()
    lines = raw.decode("utf-8").splitlines()
    prompts = [json.loads(line) for line in lines if line.strip()]
    ok = all(
        isinstance(p.get("id"), str)
        and (isinstance(p.get("prompt"), str) or isinstance(p.get("messages"), list))
        for p in prompts
    )
    if not prompts or not ok:
        raise SystemExit(
            f"{path}: expected JSONL lines of {{'id': str, 'prompt': str}} or {{'id', 'messages'}}"
        )
    return prompts, hashlib.sha256(raw).hexdigest()


def by_workload(records: list[Doc]) -> list[tuple[str | None, list[Doc]]]:
    """The records grouped by workload, in the file's order (None: a plain prompt set)."""
    groups: dict[str | None, list[Doc]] = {}
    for record in records:
        groups.setdefault(record.get("workload"), []).append(record)
    return list(groups.items())


def workload_sets(groups: list[tuple[str | None, list[Doc]]]) -> list[Doc]:
    """Each named workload as the fact names it (schema WorkloadSet): its source, size and the sha256 of
    its records as the controller wrote them (analysis.workloads.records.digest)."""
    sets = []
    for name, records in groups:
        if name is None:
            continue
        digest = hashlib.sha256()
        for record in records:
            digest.update((json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n").encode())
        output_len = "dataset" if any("max_tokens" in r for r in records) else "fixed"
        sets.append({"name": name, "source": str(records[0].get("set") or "unknown"), "records": len(records),
                     "sha256": digest.hexdigest(), "output_len": output_len})  # fmt: skip
    return sets


Level = tuple[str | None, int]  # (workload, concurrency); workload None: a plain prompt set


def parse_level(text: str) -> Level:
    """An --only level: C of a plain prompt set, or WORKLOAD:C (analysis.sweep.client.level_name
    writes them)."""
    workload, _, concurrency = text.rpartition(":")
    return workload or None, int(concurrency)


def level_name(level: Level) -> str:
    """An --only level as written (the fact's benchmark settings record them so)."""
    workload, concurrency = level
    return f"{workload}:{concurrency}" if workload else str(concurrency)


def measured(only: list[Level] | None, workload: str | None, concurrency: int) -> bool:
    """Whether this level is measured: every level unless --only names some (a finalist's
    relaunch measures only its close calls)."""
    return not only or (workload, concurrency) in only


def only_problem(only: list[Level] | None, groups: list[tuple[str | None, list[Doc]]],
                 concurrency: list[int]) -> str | None:  # fmt: skip
    """Why an --only level is not one this run measures, or None."""
    known = {(w, c) for w, _ in groups for c in concurrency}
    unknown = [level_name(level) for level in only or [] if level not in known]
    return f"--only {', '.join(unknown)}: not a level of this run" if unknown else None


def add_measurement_options(p: argparse.ArgumentParser) -> None:
    """The options of a measurement, shared with the bench_serving adapter so both clients take
    the role's settings the same way."""
    p.add_argument("--url", required=True, help="http://127.0.0.1:PORT")
    p.add_argument("--prompts", required=True, help="JSONL file of {id, prompt}")
    p.add_argument("--max-tokens", type=int, required=True)
    p.add_argument("--warmup", type=int, default=1, help="unrecorded requests first")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--concurrency", type=int, action="append", help="repeatable")
    p.add_argument("--api-key-env", help="name of the env var holding the API key")
    p.add_argument("--timeout-s", type=float, default=600.0, help="per request")
    p.add_argument("--output", help="also write the document to this file")
    p.add_argument("--requests", type=int, help="per level and repeat (default: max(4 x c, records))")
    p.add_argument("--duration-s", type=float, help="instead: send for this long per level and repeat")
    p.add_argument("--request-rate", type=float, help="open loop: Poisson arrivals/s, at most c in flight")
    p.add_argument("--seed", type=int, default=42, help="seed of the records sent (and of the arrivals)")
    p.add_argument("--only", action="append", type=parse_level, metavar="[WORKLOAD:]C",
                   help="measure only this level (repeatable; default: every level)")  # fmt: skip


def add_stopping_options(p: argparse.ArgumentParser) -> None:
    """When a level stops early (Stop), unless --requests or --duration-s fix what it sends."""
    p.add_argument(
        "--ci-pct", type=float, default=3.0, help="stop at this tok/s 95%% CI half-width; 0: send the count"
    )
    p.add_argument("--min-requests", type=int, default=8, help="a stopping level sends at least this many")
    p.add_argument("--level-budget-s", type=float, default=60.0,
                   help="and sends for at most this long, its repeats sharing it")  # fmt: skip
    p.add_argument("--launch-cost-s", type=float,
                   help="with --launch-cv-pct, instead of --ci-pct: stop a level once it sent what is "
                        "worth sending in a launch that costs this long")  # fmt: skip
    p.add_argument("--launch-cv-pct", type=float, help="the host's launch-to-launch CV of tok/s, %%")


def stopping(args: argparse.Namespace) -> Stop | None:
    """The levels' stopping rule, None when the count or the duration is given (they keep their meaning)."""
    launch = None
    if args.launch_cost_s is not None:
        launch = LaunchCost(args.launch_cost_s, args.launch_cv_pct / 100.0, args.repeats)
    if args.requests is not None or args.duration_s is not None or (launch is None and args.ci_pct == 0):
        return None
    # A level's budget is what it costs in all: each repeat gets an equal share.
    return Stop(args.ci_pct, args.min_requests, args.level_budget_s / args.repeats, launch)


def stop_settings(stop: Stop | None, level_budget_s: float) -> Doc:
    """The stopping rule as the fact's benchmark settings record it (None: every level sent its count);
    the budget per level as given, not rebuilt from a repeat's share (0.9 / 3 x 3 is not 0.9)."""
    launch = stop.launch if stop else None
    return {"ci_pct": stop and (None if launch else stop.ci_pct), "min_requests": stop and stop.min_requests,
            "level_budget_s": stop and level_budget_s, "launch_cost_s": launch and launch.cost_s,
            "launch_cv_pct": launch and round(launch.cv * 100.0, 6)}  # fmt: skip


def load_problem(args: argparse.Namespace) -> str | None:
    """Why these load options cannot be used together, or None (the plan checks them first)."""
    if args.requests is not None and args.duration_s is not None:
        return "give --requests or --duration-s, not both"
    for name in ("requests", "duration_s", "request_rate"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            return f"--{name.replace('_', '-')} must be > 0"
    level = max(args.concurrency or [1])
    if args.requests is not None and args.request_rate is None and args.requests < requests_needed(level):
        return (f"--requests {args.requests} is too few for concurrency {level}: its window leaves out "
                f"{level - 1} at each end and holds at least {window_minimum(level)}, so send at least "
                f"{requests_needed(level)}")  # fmt: skip
    return None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description="specsweep on-host benchmark client")
    p.add_argument("--engine", required=True, choices=sorted(ENGINES))
    add_measurement_options(p)
    add_stopping_options(p)
    args = p.parse_args(argv)
    args.concurrency = args.concurrency or [1]
    if min(args.max_tokens, args.repeats, *args.concurrency) < 1 or args.warmup < 0:
        p.error("--max-tokens, --repeats, --concurrency must be >= 1, --warmup >= 0")
    if args.ci_pct < 0 or args.min_requests < 1 or not args.level_budget_s > 0:
        p.error("--ci-pct must be >= 0, --min-requests >= 1, --level-budget-s > 0")
    if (args.launch_cost_s is None) != (args.launch_cv_pct is None):
        p.error("--launch-cost-s and --launch-cv-pct go together")
    if args.launch_cost_s is not None and not (args.launch_cost_s > 0 and args.launch_cv_pct > 0):
        p.error("--launch-cost-s and --launch-cv-pct must be > 0")
    problem = load_problem(args)
    if problem:
        p.error(problem)
    return args


def load_settings(args: argparse.Namespace) -> Doc:
    """How the levels were driven, for the fact's benchmark settings."""
    only = [level_name(level) for level in args.only] if args.only else None
    return {"requests": args.requests, "duration_s": args.duration_s, "request_rate": args.request_rate,
            "seed": args.seed, "only": only}  # fmt: skip


def emit(doc: Doc, output: str | None) -> None:
    """Print the document as one line, and write it to `output` if given."""
    text = json.dumps(doc)
    if output:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    print(text)


def progress(line: str) -> None:
    """What the client is doing now, on stderr: the benchmark role shows its last line."""
    print(line, file=sys.stderr, flush=True)


def emit_when_stopped(runs: list[Doc], level: Doc, output: str | None) -> None:
    """On SIGTERM (its server died, or the sweep stops) print what was measured before exiting: the
    finished runs are kept in the fact, and `level` (updated as it goes) names where it stopped."""

    def stopped(signum: int, frame: Any) -> None:
        emit({"error": f"stopped by {signal.Signals(signum).name}", "runs": runs, "level": level}, output)
        sys.stdout.flush()
        os._exit(128 + signum)  # requests in flight are not waited for

    signal.signal(signal.SIGTERM, stopped)


def main(argv: list[str] | None = None) -> int:
    """Warm up, then run every (concurrency, repeat); exit 1 if a run got nothing."""
    args = parse_args(argv)
    prompts, digest = load_prompts(args.prompts)
    groups = by_workload(prompts)
    problem = only_problem(args.only, groups, args.concurrency)
    if problem:  # before any request: a level the records do not have
        emit({"error": problem, "runs": []}, args.output)
        return 1
    api_key = os.environ.get(args.api_key_env) if args.api_key_env else None
    client = Client(args.engine, args.url, api_key, args.timeout_s)
    work = make_work(client, args.max_tokens)
    for i in range(args.warmup):
        progress(f"warm-up {i + 1}/{args.warmup}")
        work(prompts[i % len(prompts)])
    runs: list[Doc] = []
    level: Doc = {}
    emit_when_stopped(runs, level, args.output)
    watch = specsweep_interference.Watch.for_port(urllib.parse.urlsplit(args.url).port)
    probe = specsweep_serverload.Probe(args.engine, client.host, client.port, client.headers)
    stop = stopping(args)
    for workload, records in groups:
        for conc in (c for c in args.concurrency if measured(args.only, workload, c)):
            load = Load(conc, requests_per_level(conc, len(records), args.requests), args.duration_s,
                        args.request_rate, stop)  # fmt: skip
            for repeat in range(1, args.repeats + 1):
                where = f"concurrency {conc}" + ("" if workload is None else f", workload {workload}")
                progress(f"repeat {repeat}/{args.repeats} at {where}")
                level.update(concurrency=conc, repeat=repeat, workload=workload)
                key = level_key(args.seed, conc, repeat) + ("" if workload is None else f"/{workload}")
                watch.begin()
                probe.start()
                run = {"repeat": repeat, **run_level(work, records, load, key)}
                probe.stop()
                run["interference"] = watch.end()
                # The server's running and queued requests inside the window (None: no figure).
                run["server_load"] = probe.window(run["window_start_at"], run["window_end_at"])
                # An engine that counts speculation only server-wide: its counters over the window.
                run["spec"] = probe.spec(run["window_start_at"], run["window_end_at"]) or run["spec"]
                if workload is not None:
                    run["workload"] = workload
                if all(r["error"] for r in run["requests"]):
                    # Nothing came back: the caller records this cause instead of numbers.
                    cause = run["requests"][0]["error"] if run["requests"] else "no request inside the window"
                    error = f"every request failed ({where}, repeat {repeat}): "
                    emit({"error": error + cause, "runs": runs, "level": level}, args.output)
                    return 1
                runs.append(run)
    version, info = server_info(client)
    benchmark = {"client": CLIENT, "prompt_set": os.path.basename(args.prompts),
                 "prompt_sha256": digest, "max_tokens": args.max_tokens, "warmup": args.warmup,
                 "repeats": args.repeats, "concurrency": args.concurrency, **load_settings(args),
                 **stop_settings(stop, args.level_budget_s), "workloads": workload_sets(groups)}  # fmt: skip
    doc = {"client": CLIENT, "engine": args.engine, "engine_version": version,
           "benchmark": benchmark, "runs": runs, "server_info": info}  # fmt: skip
    emit(doc, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
