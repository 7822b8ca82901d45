"""The suite's client beside AIPerf (NVIDIA's, the client InferenceX uses) on the same llama-server:
do the two agree on TTFT, per-token latency, per-request speed, e2e and total throughput, and on
s1 against the baseline?

Not a test and not a dependency: AIPerf lives in a venv of its own (`--aiperf`), never in the
project's, and never in CI. One server per config (the demo's 270M model; s1 drafts one n-gram
token, as the demo's s1); at each level and round the two clients take turns (which goes first
alternates), each sent the same prompts in the same order: the records the suite's client draws
for that level (its seeded sampler), written as AIPerf's single-turn dataset. Both: the raw
completion endpoint's streamed text, `--max-tokens` tokens with EOS ignored, greedy, no prompt
cache, a new connection per request, one warm-up request. AIPerf counts tokens from the server's
usage (`--use-server-token-count`); the tokenizer it loads anyway is built offline from the GGUF's
own vocabulary (transformers' GGUF tokenizer mapping), so nothing is downloaded.

Definitions (docs/results.md): TTFT; per-token latency TPOT = (e2e - TTFT) / (output tokens - 1)
per request (AIPerf's inter_token_latency); per-request speed, the suite's decode tok/s and AIPerf's
output_token_throughput_per_user; e2e; total output tok/s (the suite's over its measured window,
AIPerf's over its run). Each figure is the p50 over requests, then the median over rounds. The
"paired gap" is the median over rounds of each round's gap, the two clients' turns next to each
other in time: on a machine whose speed drifts between minutes it is the steadier comparison;
"round cv" (specsweep/aiperf) says how much one client's rounds varied.

    python3.11 -m venv /tmp/aiperf && /tmp/aiperf/bin/pip install aiperf gguf
    nice -n 10 .venv/bin/python bench/peer.py --aiperf /tmp/aiperf/bin/aiperf [--levels 1,4] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from load import CACHE, PROMPTS, start_server  # bench/load.py: the demo's server

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "roles/benchmark/files"))

import specsweep_bench  # noqa: E402  (the suite's client: its sampler picks the prompts)

from analysis.facts.rows import quantiles  # noqa: E402
from analysis.metrics import tpot_s  # noqa: E402

CLIENT = REPO / "roles/benchmark/files/specsweep_bench.py"
CLIENTS = ("specsweep", "aiperf")  # which goes first alternates round by round
WHOLE = "aiperf, whole run"  # AIPerf's own summary: ramp and drain included
CONFIGS = {  # the demo's configs: llama-server flags beyond the model and the slots
    "baseline": (),
    "s1": ("--spec-type", "ngram-mod", "--spec-ngram-mod-n-match", "4", "--spec-ngram-mod-n-min", "1",
           "--spec-ngram-mod-n-max", "1"),
}  # fmt: skip
FIGURES = [  # (key, header, format)
    ("ttft_ms", "TTFT p50 ms", ".0f"),
    ("tpot_ms", "TPOT p50 ms", ".1f"),
    ("user_tps", "tok/s/req", ".2f"),
    ("e2e_s", "e2e p50 s", ".2f"),
    ("total_tps", "total tok/s", ".2f"),
    ("tokens", "out tokens", ".0f"),
]
# The tokenizer AIPerf loads, from the GGUF's vocabulary: run by the AIPerf venv's Python.
TOKENIZER = """
import sys
import gguf
from transformers import PreTrainedTokenizerFast
from transformers.integrations.gguf import gguf_tokenizer_mapping as mapping
meta = {k: f.contents() for k, f in gguf.GGUFReader(sys.argv[1]).fields.items()}
names = mapping.GGUF_TOKENIZER_MAPPING["tokenizer"]
tok = {new: meta["tokenizer." + old] for old, new in names.items() if "tokenizer." + old in meta}
backend, _ = mapping.convert_gguf_tokenizer(meta["general.architecture"], tok)
ids = {"bos_token": "bos_token_id", "eos_token": "eos_token_id", "unk_token": "unk_token_id",
       "pad_token": "pad_token_id"}
special = {k: tok["tokens"][tok[v]] for k, v in ids.items() if tok.get(v) is not None}
PreTrainedTokenizerFast(tokenizer_object=backend, **special).save_pretrained(sys.argv[2])
"""


def level_prompts(records: list[dict], concurrency: int, requests: int, seed: int) -> list[dict]:
    """The records the suite's client sends at this level (one repeat), in its order."""
    pick = specsweep_bench.record_sampler(records, specsweep_bench.level_key(seed, concurrency, 1))
    return [pick() for _ in range(requests)]


def summary(requests: list[dict], total_tps: float) -> dict[str, float]:
    """One client's figures over the requests it counts (the suite's request dicts, or AIPerf's
    records in their shape): p50s, and its total output tok/s."""
    ok = [r for r in requests if r["error"] is None]
    tpot = [tpot_s(r["output_tokens"], r["ttft_s"], r["e2e_s"]) for r in ok]
    return {
        "ttft_ms": quantiles((r["ttft_s"] * 1000 for r in ok), 0.5)[0],
        "tpot_ms": quantiles((t * 1000 for t in tpot if t is not None), 0.5)[0],
        "user_tps": quantiles((r["decode_tps"] for r in ok if r["decode_tps"]), 0.5)[0],
        "e2e_s": quantiles((r["e2e_s"] for r in ok), 0.5)[0],
        "total_tps": total_tps,
        "tokens": statistics.median(r["output_tokens"] for r in ok),
    }


def ours(url: str, concurrency: int, requests: int, max_tokens: int, seed: int) -> dict[str, float]:
    """One repeat of the suite's client at this level: its figures over its measured window."""
    argv = [sys.executable, str(CLIENT), "--engine", "llama_cpp", "--url", url, "--prompts", str(PROMPTS),
            "--max-tokens", str(max_tokens), "--warmup", "1", "--repeats", "1", "--seed", str(seed),
            "--concurrency", str(concurrency), "--requests", str(requests)]  # fmt: skip
    (run,) = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)["runs"]
    return summary(run["requests"], run["window_output_tokens"] / run["duration_s"])


def in_suite_window(export: Path, concurrency: int) -> dict[str, float]:
    """AIPerf's own per-request records (profile_export.jsonl) judged over the window the suite's
    client measures (specsweep_bench.window: from the c-th send to the first completion after the
    last send), so both clients' figures count the same part of a run: at c > 1 a closed loop's
    ramp (c requests sent at once, their prefills queued) moves a p50 of few requests a lot."""
    units = []
    for line in export.read_text().splitlines():
        record = json.loads(line)
        meta, m = record["metadata"], record["metrics"]
        if meta["phase_kind"] == "warmup":
            continue
        request = {"ttft_s": m["time_to_first_token"]["value"] / 1000,
                   "e2e_s": m["request_latency"]["value"] / 1000,
                   "output_tokens": m["output_sequence_length"]["value"], "error": None,
                   "decode_tps": m["output_token_throughput_per_user"]["value"]}  # fmt: skip
        units.append(specsweep_bench.Unit(meta["request_start_ns"] / 1e9, meta["request_end_ns"] / 1e9,
                                          [(request, None)]))  # fmt: skip
    opens, closes = specsweep_bench.window(units, specsweep_bench.Load(concurrency, len(units)))
    counted = [r for u in units if u.sent >= opens and u.done <= closes for r, _ in u.outcomes]
    return summary(counted, specsweep_bench.in_window_tokens(units, opens, closes) / (closes - opens))


def theirs(aiperf: str, tokenizer: Path, url: str, prompts: list[dict], concurrency: int, max_tokens: int,
           work: Path) -> tuple[dict[str, float], dict[str, float]]:  # fmt: skip
    """One AIPerf run of the same prompts at this level: its own p50s and output throughput over its
    whole run, and the same figures over the suite's window."""
    dataset, out = work / "dataset.jsonl", work / "aiperf"
    dataset.write_text("".join(json.dumps({"text": p["prompt"]}) + "\n" for p in prompts))
    extra = {"max_tokens": max_tokens, "ignore_eos": True, "temperature": 0, "cache_prompt": False}
    argv = [aiperf, "profile", "--model", "demo", "--url", url, "--endpoint-type", "completions",
            "--streaming", "--input-file", str(dataset), "--custom-dataset-type", "single-turn",
            "--dataset-sampling-strategy", "sequential", "--request-count", str(len(prompts)),
            "--concurrency", str(concurrency), "--warmup-request-count", "1", "--tokenizer", str(tokenizer),
            "--use-server-token-count", "--connection-reuse-strategy", "never", "--ui-type", "none",
            # Its scraper of the server's /metrics is not compared, and on a busy 2-core machine it
            # missed heartbeats and ended the run (exit 1, 2026-12-06).
            "--no-server-metrics",
            "--extra-inputs", json.dumps(extra), "--output-artifact-dir", str(out)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=work)
    if done.returncode != 0:
        raise SystemExit(f"aiperf failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    m = json.loads((out / "profile_export_aiperf.json").read_text())
    whole = {
        "ttft_ms": m["time_to_first_token"]["p50"],
        "tpot_ms": m["inter_token_latency"]["p50"],
        "user_tps": m["output_token_throughput_per_user"]["p50"],
        "e2e_s": m["request_latency"]["p50"] / 1000.0,
        "total_tps": m["output_token_throughput"]["avg"],
        "tokens": m["output_sequence_length"]["p50"],
    }
    return whole, in_suite_window(out / "profile_export.jsonl", concurrency)


Rounds = dict[tuple[str, int, str], list[dict[str, float]]]


def measure(args: argparse.Namespace, tokenizer: Path, work: Path) -> Rounds:
    """(config, level, client) -> each round's figures, in round order."""
    records = [json.loads(line) for line in PROMPTS.read_text().splitlines() if line.strip()]
    rounds: Rounds = {}
    for config in args.configs:
        cpus = sorted(os.sched_getaffinity(0))
        if args.pin:  # the server (and its threads) inherit the last CPU, then the clients the rest
            os.sched_setaffinity(0, cpus[-1:])
        server, url = start_server(args.engine_python, args.model, max(args.levels), work / f"{config}.log",
                                   CONFIGS[config])  # fmt: skip
        if args.pin:
            os.sched_setaffinity(0, cpus[:-1])
        try:
            for level in args.levels:
                # The client's own default (per slot x c, at least one pass over the records).
                requests = max(args.per_slot * level, len(records))
                prompts = level_prompts(records, level, requests, args.seed)
                for i in range(args.rounds):
                    for client in CLIENTS if i % 2 == 0 else CLIENTS[::-1]:
                        print(f"{config} c{level} round {i + 1}/{args.rounds}: {client}", file=sys.stderr)
                        if client == "specsweep":
                            got = {client: ours(url, level, requests, args.max_tokens, args.seed)}
                        else:
                            whole, window = theirs(args.aiperf, tokenizer, url, prompts, level,
                                                   args.max_tokens, work)  # fmt: skip
                            got = {client: window, WHOLE: whole}
                        for name, figures in got.items():
                            rounds.setdefault((config, level, name), []).append(figures)
        finally:
            server.terminate()  # the server this script started
            server.wait(timeout=60)
            os.sched_setaffinity(0, cpus)
    return rounds


def medians(rounds: Rounds) -> dict[tuple[str, int, str], dict[str, float]]:
    """(config, level, client) -> each figure's median over the rounds."""
    return {key: {f: statistics.median(r[f] for r in runs) for f, _, _ in FIGURES}
            for key, runs in rounds.items()}  # fmt: skip


def paired_gap(suite: list[dict[str, float]], peer: list[dict[str, float]], figure: str) -> float:
    """The median over rounds of one round's gap, %: the two turns of a round ran one after the other."""
    return statistics.median((a[figure] / b[figure] - 1) * 100 for a, b in zip(suite, peer, strict=True))


def cv(runs: list[dict[str, float]], figure: str) -> float:
    """How much one client's rounds varied: their standard deviation over their mean, %."""
    values = [r[figure] for r in runs]
    return statistics.stdev(values) / statistics.fmean(values) * 100 if len(values) > 1 else 0.0


def table(rounds: Rounds, args: argparse.Namespace) -> str:
    """Both clients' figures per config and level, the gaps between them, then the s1 / baseline ratios."""
    figures = medians(rounds)
    head = ["config", "c", "client", *(h for _, h, _ in FIGURES)]
    rows = []
    for config in args.configs:
        for level in args.levels:
            a, b = figures[(config, level, "specsweep")], figures[(config, level, "aiperf")]
            ra, rb = rounds[(config, level, "specsweep")], rounds[(config, level, "aiperf")]
            rows.append([config, str(level), "specsweep", *(format(a[f], fmt) for f, _, fmt in FIGURES)])
            rows.append([config, str(level), "aiperf", *(format(b[f], fmt) for f, _, fmt in FIGURES)])
            rows.append(["", "", "gap %", *(f"{(a[f] / b[f] - 1) * 100:+.1f}" for f, _, _ in FIGURES)])
            rows.append(["", "", "paired gap %", *(f"{paired_gap(ra, rb, f):+.1f}" for f, _, _ in FIGURES)])
            rows.append(["", "", "round cv %", *(f"{cv(ra, f):.0f}/{cv(rb, f):.0f}" for f, _, _ in FIGURES)])
            w = figures[(config, level, WHOLE)]
            rows.append(["", "", WHOLE, *(format(w[f], fmt) for f, _, fmt in FIGURES)])
    lines = _aligned(head, rows)
    if "baseline" in args.configs and len(args.configs) > 1:
        spec = next(c for c in args.configs if c != "baseline")
        lines += ["", f"{spec} / baseline, % (the same sign and within 5 points is agreement)"]
        ratio_rows = []
        for level in args.levels:
            for f, header, _ in FIGURES[:-1]:
                pct = [(figures[(spec, level, c)][f] / figures[("baseline", level, c)][f] - 1) * 100
                       for c in ("specsweep", "aiperf")]  # fmt: skip
                # The same from the paired gaps: specsweep's ratio is AIPerf's x (1 + g_s1) / (1 + g_base).
                g = [1 + paired_gap(rounds[(c, level, "specsweep")], rounds[(c, level, "aiperf")], f) / 100
                     for c in (spec, "baseline")]  # fmt: skip
                paired = (1 + pct[1] / 100) * (g[0] / g[1] - 1) * 100
                ratio_rows.append([str(level), header, f"{pct[0]:+.1f}", f"{pct[1]:+.1f}",
                                   f"{pct[0] - pct[1]:+.1f}", f"{paired:+.1f}"])  # fmt: skip
        lines += _aligned(["c", "figure", "specsweep", "aiperf", "points apart", "paired"], ratio_rows)
    return "\n".join(lines)


def _aligned(head: list[str], rows: list[list[str]]) -> list[str]:
    """Rows under a header, each column as wide as its widest cell; text left, numbers right."""
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = []
    for row in [head, *rows]:
        cells = zip(row, widths, strict=True)
        lines.append("  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(cells)))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aiperf", required=True, help="the aiperf command of its own venv")
    parser.add_argument("--levels", default="1,4")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--per-slot",
        type=int,
        default=specsweep_bench.REQUESTS_PER_LEVEL,
        help="requests per level: this many x c, at least one pass over the records",
    )
    parser.add_argument("--configs", default="baseline,s1")
    parser.add_argument(
        "--pin",
        action="store_true",
        help="the server on the last CPU alone, both clients on the others (neither client's own CPU "
        "use then slows the server it measures)",
    )
    parser.add_argument("--rounds-out", type=Path, help="write every round's figures here (JSON lines)")
    parser.add_argument("--engine-python", type=Path, default=CACHE / "llama.cpp-venv" / "bin" / "python")
    parser.add_argument("--model", type=Path, default=CACHE / "models" / "gemma-3-270m-q4_k_m.gguf")
    args = parser.parse_args()
    args.levels = [int(c) for c in args.levels.split(",")]
    args.configs = args.configs.split(",")
    if args.pin and len(os.sched_getaffinity(0)) < 2:
        parser.error("--pin needs two CPUs at least: one for the server, the rest for the clients")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tokenizer = work / "tokenizer"
        python = str(Path(args.aiperf).with_name("python"))
        subprocess.run(
            [python, "-c", TOKENIZER, str(args.model), str(tokenizer)], capture_output=True, check=True
        )
        rounds = measure(args, tokenizer, work)
    if args.rounds_out:
        lines = [{"config": c, "level": lv, "client": n, "round": i + 1, **r}
                 for (c, lv, n), runs in rounds.items() for i, r in enumerate(runs)]  # fmt: skip
        args.rounds_out.write_text("".join(json.dumps(line) + "\n" for line in lines))
    print(f"specsweep's client vs AIPerf, llama-server {args.model.name}, {args.max_tokens} tokens, "
          f"{PROMPTS.name}, {args.per_slot} requests per slot, median of {args.rounds} round(s) each;"
          " aiperf: its records over the suite's window (no ramp, no drain), then its summary"
          + ("; the server alone on the last CPU, clients on the rest" if args.pin else ""))  # fmt: skip
    print(table(rounds, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
