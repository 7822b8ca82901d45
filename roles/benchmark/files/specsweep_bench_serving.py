"""Measure with SGLang's own client: `python -m sglang.bench_serving` once per (concurrency,
repeat), its JSONL turned into the document specsweep_bench.py prints (same keys, same fact).

Standard library only, Python 3.9+: this adapter runs with the host's python3; only bench_serving
runs in SGLang's environment (--sglang-python). Checked against sglang 0.5.23; `serving.py:N` is
a line of sglang/benchmark/serving.py, `sharegpt.py:N` of sglang/benchmark/datasets/sharegpt.py.

What bench_serving measures, and how it lands in the fact:
- load: --num-prompts N (benchmark_requests; default max(4 x c, prompts)) records drawn as
  specsweep_bench.py draws them (record_sampler, the same seed), written as the dataset in that
  order; --max-concurrency c; --request-rate (benchmark_request_rate; default inf: a closed loop
  at c); --seed. bench_serving has no duration mode (--duration-s is refused), and its result has
  no per-request send times, so its figures cover every request (ramp and drain included) and
  achieved_concurrency is its own `concurrency` (sum of latencies / duration, serving.py).
- prompts: those records as a ShareGPT file (first turn = prompt); sent as /generate `text`,
  greedy (--temperature defaults to 0.0, serving.py:2560), EOS ignored (serving.py:703, unless
  --disable-ignore-eos), --sharegpt-output-len tokens each (sharegpt.py:129-131): the requests
  specsweep_bench.py sends.
- order: bench_serving shuffles the dataset after random.seed(--seed) (serving.py:2055,
  sharegpt.py:98); the same shuffle of indices here tells which prompt each result is.
- per request (--output-details, serving.py:1946-1951): ttfts -> ttft_s, output_lens ->
  output_tokens, generated_texts -> text, errors -> error, itls -> itl_s. bench_serving spreads a
  chunk of k tokens as k equal gaps (serving.py:796-797), so itl_s is per token, not per chunk
  as specsweep_bench.py records it. There is no per-request latency in the file: e2e_s is
  ttft + sum(itls) (to the last token chunk) and decode_tps (tokens - 1) / sum(itls), the
  specsweep client's definition.
- accept length: the server's average since its counters were last reset (serving.py:1654);
  --flush-cache resets them after the warm-up (serving.py:1519-1523, SGLang's
  Scheduler.flush_cache -> metrics_reporter.reset_metrics), so it is this run's. Data-parallel
  servers report rank 0 only.
- server load: specsweep_bench.py's probe (specsweep_serverload.py) reads the server's own
  running and queued requests from /metrics while bench_serving runs; the run keeps those inside
  bench_serving's measured window (bench_window), as Run.server_load.
- everything else bench_serving computed (output_throughput, median_itl_ms, p99_ttft_ms, ...)
  stays in server_info["bench_serving_runs"], one entry per run; the raw JSONL (with the
  server's /server_info per line) stays on the host (--jsonl), bench_serving's console output
  beside it (.log).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import urllib.parse
from typing import Any

import specsweep_interference
import specsweep_serverload
from specsweep_bench import (
    Client,
    add_measurement_options,
    emit,
    level_key,
    load_problem,
    load_prompts,
    load_settings,
    measured,
    only_problem,
    progress,
    record_sampler,
    requests_per_level,
)
from specsweep_bench_engines import sglang_server_facts

CLIENT = "sglang.bench_serving"
# 0.5.23 keeps this name as an alias of sglang.benchmark.serving (sglang/bench_serving.py);
# older 0.5.x releases only have this one.
MODULE = "sglang.bench_serving"
# bench_serving's default (serving.py:2554), as the seed setting's: the prompt order depends on it.
SEED = 42
# Seconds for bench_serving to start (imports, tokenizer load) on top of its requests.
STARTUP_S = 300
# Flags this adapter sets or whose change would break the mapping onto the fact. Extra
# arguments may not repeat them, nor abbreviate them (the parser allows abbreviations).
RESERVED = (
    "--backend", "--base-url", "--host", "--port", "--dataset-name", "--dataset-path",
    "--num-prompts", "--sharegpt-output-len", "--sharegpt-context-len", "--max-concurrency",
    "--warmup-requests", "--flush-cache", "--seed", "--output-file", "--output-details",
    "--disable-stream", "--disable-ignore-eos", "--dataset-offset", "--request-rate",
)  # fmt: skip
DETAILS = ("output_lens", "ttfts", "itls", "generated_texts", "errors")
Doc = dict[str, Any]


class BenchError(Exception):
    """bench_serving did not produce a usable result line."""


def sharegpt_dataset(prompts: list[Doc]) -> list[Doc]:
    """The prompt set as a ShareGPT list: bench_serving keeps the first two turns (sharegpt.py:83-95)."""
    # The answer turn only sets a length when --sharegpt-output-len is absent: left empty.
    turns = [[{"from": "human", "value": p["prompt"]}, {"from": "gpt", "value": ""}] for p in prompts]
    return [{"id": p["id"], "conversations": t} for p, t in zip(prompts, turns)]


def bench_order(n: int, seed: int = SEED) -> list[int]:
    """Prompt index of each bench_serving result: its dataset after random.seed + random.shuffle."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


def extra_problem(extra: list[str]) -> str | None:
    """Why these extra bench_serving arguments cannot be used, or None."""
    for arg in extra:
        flag = arg.split("=", 1)[0]
        if flag.startswith("--") and len(flag) > 2 and any(r.startswith(flag) for r in RESERVED):
            return f"benchmark_sglang_extra_args: {flag} is set by specsweep (reserved: {' '.join(RESERVED)})"
    return None


def bench_argv(
    python: str, url: str, dataset: str, n_prompts: int, max_tokens: int, concurrency: int,
    warmup: int, jsonl: str, extra: list[str], seed: int = SEED, rate: float | None = None,
) -> list[str]:  # fmt: skip
    """One bench_serving run of the dataset at one concurrency (an argv, never a shell)."""
    return [
        python, "-m", MODULE,
        "--backend", "sglang",  # POST {base_url}/generate (serving.py:995, 692)
        "--base-url", url,
        "--dataset-name", "sharegpt",
        "--dataset-path", dataset,
        "--num-prompts", str(n_prompts),
        "--sharegpt-output-len", str(max_tokens),
        "--max-concurrency", str(concurrency),
        # inf (bench_serving's default): all queued at once, c in flight (a closed loop)
        *(["--request-rate", str(rate)] if rate is not None else []),
        "--warmup-requests", str(warmup),
        "--flush-cache",  # after the warm-up: prefix cache and spec counters start empty
        "--seed", str(seed),
        "--output-file", jsonl,  # appended, one line per run (serving.py:1961)
        "--output-details",
        "--disable-tqdm",
        *extra,
    ]  # fmt: skip


def _finite(value: Any) -> Any:
    """JSON-safe scalar: bench_serving writes request_rate inf as `Infinity`."""
    return str(value) if isinstance(value, float) and not math.isfinite(value) else value


def _error(text: Any) -> str | None:
    """A request's error: None for bench_serving's "", else its last line (tracebacks are long)."""
    if not text:
        return None
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    return (lines[-1] if lines else str(text)).strip()[:500]


def request_result(prompt_id: str, tokens: int, ttft: float, itls: list[float], text: str, error: Any) -> Doc:
    """RequestResult dict of one bench_serving request."""
    span = sum(itls)
    err = _error(error)
    return {
        "prompt_id": prompt_id,
        "output_tokens": tokens if err is None else 0,
        "ttft_s": ttft,
        "e2e_s": ttft + span,
        "decode_tps": (tokens - 1) / span if err is None and tokens >= 2 and span > 0 else None,
        "itl_s": [float(x) for x in itls],
        "text": text or "",
        "error": err,
    }


def convert_line(
    line: Doc, prompt_ids: list[str], repeat: int, concurrency: int, seed: int = SEED
) -> tuple[Doc, Doc]:
    """(Run dict, its aggregates) from one bench_serving JSONL line; BenchError if it is unusable."""
    missing = [k for k in (*DETAILS, "duration") if k not in line]
    if missing:
        raise BenchError(f"bench_serving result lacks {', '.join(missing)} (--output-details?)")
    counts = {k: len(line[k]) for k in DETAILS}
    if set(counts.values()) != {len(prompt_ids)}:
        raise BenchError(f"bench_serving returned {counts} results for {len(prompt_ids)} prompts")
    # Result j is prompt order[j]; listed in the order drawn (the dataset's).
    position = {i: j for j, i in enumerate(bench_order(len(prompt_ids), seed))}
    requests = [
        request_result(pid, *(line[k][position[i]] for k in DETAILS)) for i, pid in enumerate(prompt_ids)
    ]
    accept = line.get("accept_length")
    accept = float(accept) if isinstance(accept, (int, float)) and not isinstance(accept, bool) else None
    spec = {"drafted": None, "accepted": None, "verify_steps": None, "accept_length": accept,
            "accept_rate": None}  # fmt: skip
    achieved = line.get("concurrency")  # bench_serving's: sum of latencies / duration
    achieved = float(achieved) if isinstance(achieved, (int, float)) and math.isfinite(achieved) else None
    run = {"repeat": repeat, "concurrency": concurrency, "duration_s": float(line["duration"]),
           "requests": requests, "spec": spec, "achieved_concurrency": achieved,
           "requests_sent": len(prompt_ids)}  # fmt: skip
    aggregates = {k: _finite(v) for k, v in line.items() if not isinstance(v, (list, dict))}
    return run, {"concurrency": concurrency, "repeat": repeat, **aggregates}


def bench_window(jsonl: str, duration_s: float) -> tuple[float, float]:
    """bench_serving's measured window in epoch seconds. It has no timestamps of its own: it appends
    the result line right after its metrics (serving.py:1961), and its `duration` runs from the
    first request sent to the last answer and its /server_info read (serving.py:1551-1665), so the
    window ends at the line's write (the file's mtime) and lasts `duration`; the warm-up is before."""
    closes = os.stat(jsonl).st_mtime
    return closes - duration_s, closes


def read_lines(path: str) -> list[str]:
    """Non-empty lines of a text file; [] when it does not exist."""
    try:
        with open(path, encoding="utf-8") as fh:
            return [line for line in fh if line.strip()]
    except FileNotFoundError:
        return []


def run_bench(argv: list[str], env: dict[str, str], timeout_s: float, log: str, title: str) -> None:
    """Run one bench_serving; its console output is appended to `log`; BenchError on failure."""
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"== {title}: {' '.join(argv)}\n")
        fh.flush()
        start = fh.tell()
        try:
            proc = subprocess.run(argv, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout_s,
                                  check=False)  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise BenchError(f"bench_serving ran past {timeout_s:.0f} s (log: {log})") from exc
        except OSError as exc:
            raise BenchError(f"cannot run {argv[0]}: {exc}") from exc
    if proc.returncode != 0:
        with open(log, encoding="utf-8", errors="replace") as fh:
            fh.seek(start)
            tail = [line.strip() for line in fh.read().splitlines() if line.strip()][-3:]
        raise BenchError(f"bench_serving exited {proc.returncode}: {' | '.join(tail)} (log: {log})"[:500])


def build_parser() -> argparse.ArgumentParser:
    """Command-line options (those of specsweep_bench.py, less --engine, plus bench_serving's)."""
    p = argparse.ArgumentParser(description="specsweep adapter for python -m sglang.bench_serving")
    p.add_argument("--sglang-python", required=True, help="python of the SGLang environment")
    add_measurement_options(p)
    p.add_argument("--jsonl", required=True, help="bench_serving's own JSONL (replaced)")
    p.add_argument("--extra-arg", action="append", default=[], help="bench_serving argument, repeatable")
    return p


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The options, checked."""
    p = build_parser()
    args = p.parse_args(argv)
    args.concurrency = args.concurrency or [1]
    if min(args.repeats, *args.concurrency) < 1 or args.warmup < 0:
        p.error("--repeats, --concurrency must be >= 1, --warmup >= 0")
    if args.max_tokens < 4:
        p.error("--max-tokens must be >= 4 (bench_serving: 'output_len too small', sharegpt.py:68)")
    if not args.jsonl.endswith(".jsonl"):
        p.error("--jsonl must end with .jsonl")
    problem = load_problem(args)
    if problem or args.duration_s is not None:
        p.error(problem or "--duration-s: bench_serving sends a number of prompts (use --requests)")
    return args


def main(argv: list[str] | None = None) -> int:
    """Every (concurrency, repeat) through bench_serving; exit 1 if a run failed or got nothing."""
    args = parse_args(argv)
    prompts, digest = load_prompts(args.prompts)
    # One dataset: its levels are the plain prompt set's.
    problem = extra_problem(args.extra_arg) or only_problem(args.only, [(None, prompts)], args.concurrency)
    if problem:
        emit({"error": problem, "runs": []}, args.output)
        return 1
    base = args.jsonl[: -len(".jsonl")]
    dataset, log = f"{base}.sharegpt.json", f"{base}.log"
    for stale in (args.jsonl, log):  # a resumed config measures again from scratch
        if os.path.exists(stale):
            os.remove(stale)
    env = dict(os.environ)
    api_key = os.environ.get(args.api_key_env) if args.api_key_env else None
    if api_key:
        env["OPENAI_API_KEY"] = api_key  # sent as "Authorization: Bearer ..." (serving.py:131-135)
    runs: list[Doc] = []
    aggregates: list[Doc] = []
    last: Doc = {}
    warmup = args.warmup  # once per config, like specsweep_bench.py
    watch = specsweep_interference.Watch.for_port(urllib.parse.urlsplit(args.url).port)
    client = Client("sglang", args.url, api_key, args.timeout_s)
    probe = specsweep_serverload.Probe("sglang", client.host, client.port, client.headers)
    for conc in (c for c in args.concurrency if measured(args.only, None, c)):
        n = requests_per_level(conc, len(prompts), args.requests)
        for repeat in range(1, args.repeats + 1):
            where = f"concurrency {conc}, repeat {repeat}"
            progress(f"repeat {repeat}/{args.repeats} at concurrency {conc} (bench_serving)")
            pick = record_sampler(prompts, level_key(args.seed, conc, repeat))
            sent = [pick() for _ in range(n)]
            with open(dataset, "w", encoding="utf-8") as fh:
                json.dump(sharegpt_dataset(sent), fh)
            cmd = bench_argv(args.sglang_python, args.url, dataset, n, args.max_tokens, conc, warmup,
                             args.jsonl, args.extra_arg, seed=args.seed, rate=args.request_rate)  # fmt: skip
            rounds = math.ceil((n + warmup) / conc)
            arrivals = n / args.request_rate if args.request_rate else 0.0  # the mean time to send all
            watch.begin()  # bench_serving runs in the client's process group: its CPU is ours
            probe.start()
            try:
                run_bench(cmd, env, STARTUP_S + arrivals + args.timeout_s * rounds, log, where)
                lines = read_lines(args.jsonl)
                if len(lines) != len(runs) + 1:
                    raise BenchError(f"bench_serving wrote {len(lines) - len(runs)} result lines, not 1")
                last = json.loads(lines[-1])
                run, numbers = convert_line(last, [p["id"] for p in sent], repeat, conc, args.seed)
            except (BenchError, ValueError) as exc:
                emit({"error": f"{where}: {exc}", "runs": runs}, args.output)
                return 1
            finally:
                probe.stop()
            if all(r["error"] for r in run["requests"]):
                cause = run["requests"][0]["error"]
                error = f"every request failed ({where}): {cause}"
                emit({"error": error, "runs": runs}, args.output)
                return 1
            warmup = 0
            run["interference"] = watch.end()
            # The server's running and queued requests inside the window (None: no figure).
            run["server_load"] = probe.window(*bench_window(args.jsonl, run["duration_s"]))
            runs.append(run)
            aggregates.append(numbers)
    version, info = sglang_server_facts(last.get("server_info"))
    info.update({"bench_serving_runs": aggregates, "bench_serving_jsonl": args.jsonl})
    benchmark = {"client": CLIENT, "prompt_set": os.path.basename(args.prompts),
                 "prompt_sha256": digest, "max_tokens": args.max_tokens, "warmup": args.warmup,
                 "repeats": args.repeats, "concurrency": args.concurrency, **load_settings(args)}  # fmt: skip
    doc = {"client": CLIENT, "engine": "sglang", "engine_version": version,
           "benchmark": benchmark, "runs": runs, "server_info": info}  # fmt: skip
    emit(doc, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
