"""Time `python -m analysis report --out` over 10,000 synthetic fact files and print a table.

Not a test: numbers, not verdicts. The facts are built from the schema's structs with the
suite's default benchmark settings (3 repeats x 4 prompts x 96 tokens, like a real fact of about
25 KB), one fleet sweep of 50 hosts x 200 configs (steps x top-k x draft tokens x 2 NCCL
profiles). Rows: the full CLI (fresh interpreter, imports included) cold (`--no-cache`: every file
parsed, every plot drawn), warm (rows of unchanged files and plots of unchanged rows reused from
the cache, the everyday re-report: the sweep's own closing report fills the cache), warm with a
new 200-fact sweep reported beside it (a night's run: its own folder, parsed and plotted), and
warm with 200 facts added to the fleet's own folder (a resumed sweep: its plots drawn again, their
rows changed), plus a phase breakdown of one warm report in-process. Target (issue 4): full report
<= 3 s.

Two floor rows say what no Python reader of these files can beat on this machine: a fresh
interpreter importing pandas (what any report starts with), and reading plus JSON-decoding every
file (msgspec into plain dicts, on as many processes as the report's loader uses) with nothing
checked, no row built, no table and no plot. A cold report is above their sum by what it does
with the numbers.

    .venv/bin/python bench/analysis_report.py [--files 10000] [--runs 5] [--new 200]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import msgspec

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from analysis.facts.schema import (  # noqa: E402 - after the path set-up, as a script
    SCHEMA_VERSION,
    BenchmarkSettings,
    Engine,
    Fact,
    HostFacts,
    Launch,
    RequestResult,
    Run,
    SpecStats,
    Timings,
    load_fact,
    to_dict,
)
from analysis.sweep.config import Config, make  # noqa: E402

TEXT = "    for part in line.strip().split(';'):\n        key, _, value = part.partition('=')\n" * 3


def grid(n: int) -> list[Config]:
    """n configs: a baseline per NCCL profile, then valid (steps, topk, draft tokens) points."""
    options = [(1, 0), (2, 4), (2, 8), (4, 8), (4, 16), (8, 16), (8, 32), (8, 64), (2, 16), (4, 32), (8, 128)]
    points = [(s, k, d) for s in range(1, 17) for k, d in options if k == 1 or d <= s * k + 1]
    out = []
    for profile in ("default", "nccl_ll_ring"):
        out.append(make(env_profile=profile))
        out += [make(s, k, d or s + 1, "EAGLE3", profile) for s, k, d in points[: n // 2 - 1]]
    return out[:n]


def template(repeats: int, prompts: int, tokens: int) -> Fact:
    """One schema-valid fact with the suite's default benchmark shape."""
    itl = [0.0111] * (tokens - 1)
    req = RequestResult(prompt_id="p", output_tokens=tokens, ttft_s=0.21, e2e_s=1.3, decode_tps=90.0,
                        itl_s=itl, text=TEXT)  # fmt: skip
    spec = SpecStats(drafted=300, accepted=250, verify_steps=120, accept_length=2.5, accept_rate=0.83)
    runs = [Run(repeat=r, concurrency=1, duration_s=12.0, requests=[req] * prompts, spec=spec)
            for r in range(repeats)]  # fmt: skip
    settings = BenchmarkSettings(client="specsweep-bench/1", prompt_set="code.jsonl", prompt_sha256="0" * 64,
                                 max_tokens=tokens, warmup=1, repeats=repeats, concurrency=[1])  # fmt: skip
    return Fact(
        sweep_id="fleet", host="h", config=make(),
        engine=Engine(name="sglang", model="/data/models/Kimi-K2.5-int4", launcher="nohup", version="0.5.23"),
        launch=Launch(argv=["python", "-m", "sglang.launch_server"], env={"NCCL_PROTO": "LL"}),
        host_facts=HostFacts(hostname="h", cpu_model="AMD EPYC", cpu_count=128, mem_total_mib=1 << 20),
        timings=Timings(started_at=1e9, finished_at=1e9 + 900), status="ok", runs=runs, benchmark=settings,
        server_info={"step_time_dict": {"1": [0.0217] * 50}}, schema_version=SCHEMA_VERSION,
    )  # fmt: skip


def generate(
    root: Path, files: int, repeats: int, prompts: int, tokens: int, first_host: int = 0, sweep: str = "fleet"
) -> Path:
    """Write `files` facts as <root>/<sweep>/<host>/<config>.json (record.py's JSON layout), 200
    configs per host, the hosts numbered from `first_host`."""
    base = to_dict(template(repeats, prompts, tokens))
    load_fact(base)  # the template is valid: only numbers and names change below
    configs = grid(200)
    hosts = [f"gpu-node-{i:02d}" for i in range(first_host, first_host + max(1, files // len(configs)))]
    rng = random.Random(4 + first_host)
    written = 0
    for host in hosts:
        speed = rng.uniform(0.9, 1.05)
        for cfg in configs:
            if written == files:
                return root / sweep
            doc = copy.deepcopy(base)
            doc["sweep_id"], doc["host"], doc["host_facts"]["hostname"] = sweep, host, host
            doc["config"] = to_dict(cfg)
            gain = (
                1.0
                + (0.02 * (cfg.steps or 0) - 0.004 * (cfg.steps or 0) ** 2) * (1.0 / (cfg.topk or 1)) ** 0.3
            )
            for r in doc["runs"]:
                tps = 88.8 * speed * gain * rng.gauss(1.0, 0.01)
                for q in r["requests"]:
                    q["decode_tps"] = tps * rng.gauss(1.0, 0.003)
                    q["ttft_s"] = 0.2 * rng.uniform(0.95, 1.1)
                r["spec"]["accept_length"] = 1 + 0.55 * (cfg.steps or 0) if cfg.speculative else None
            path = root / sweep / host / f"{cfg.id}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            written += 1
    return root / sweep


def cli_seconds(sweeps: list[Path], out: Path, env: dict[str, str], *extra: str) -> float:
    """Wall seconds of one `python -m analysis report DIR... --out OUT` (output discarded)."""
    start = time.perf_counter()
    argv = [sys.executable, "-m", "analysis", "report", *map(str, sweeps), "--out", str(out), *extra]
    subprocess.run(argv, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def import_seconds(env: dict[str, str]) -> float:
    """Wall seconds of a fresh interpreter that imports pandas and exits."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import pandas"], env=env, check=True)
    return time.perf_counter() - start


def _decode(paths: list[str]) -> int:
    """Read and JSON-decode each file, keeping nothing (a floor process)."""
    for path in paths:
        with open(path, "rb") as f:
            msgspec.json.decode(f.read())
    return len(paths)


def decode_seconds(sweep: Path) -> float:
    """Wall seconds to read and decode every fact of `sweep` on the loader's worker count."""
    from analysis import forks
    from analysis.facts.load import fact_files, workers

    paths = [str(sweep / name) for name in fact_files(sweep)]
    n = workers()
    start = time.perf_counter()
    with ProcessPoolExecutor(n, mp_context=forks.context()) as pool:
        assert sum(pool.map(_decode, [paths[i::n] for i in range(n)])) == len(paths)
    return time.perf_counter() - start


def phases(sweep: Path, out: Path) -> list[tuple[str, float]]:
    """Seconds of each phase of one warm report, in this process, in the CLI's order (imports first)."""
    t = time.perf_counter()
    from analysis import cache
    from analysis.facts.load import load_sweeps
    from analysis.report.cli import build_tables, write_report
    from analysis.report.plotter import Plotter
    from analysis.report.render import render

    marks = [("imports (pandas, analysis; matplotlib: in the helper)", time.perf_counter() - t)]
    # As `report` does: the plot helper imports matplotlib while the rows load and the tables are
    # built, then draws while the text is rendered; `--out` waits for what is left of it.
    with Plotter() as plotter:
        t = time.perf_counter()
        result = load_sweeps([sweep])
        marks.append(("load (cached rows)", time.perf_counter() - t))
        t = time.perf_counter()
        tables = build_tables(result)
        plotter.submit(tables.step, tables.speed, cache.folder())
        marks.append(("tables (CIs, equivalence, cross-host)", time.perf_counter() - t))
        t = time.perf_counter()
        render(tables, "text")
        marks.append(("render text (incl. env-profile view)", time.perf_counter() - t))
        t = time.perf_counter()
        write_report(tables, out, [], plotter)
        marks.append(("--out: report.md, report.html, waiting for plots", time.perf_counter() - t))
    return marks


def main() -> int:
    """Generate, time, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5, help="runs per warm row (cold: 2, floors: 3 at most)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--new", type=int, default=200, help="facts of the new sweep and of those added")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="specsweep-bench-") as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        sweep = generate(root, args.files, args.repeats, args.prompts, args.max_tokens)
        size = sum(p.stat().st_size for p in sweep.rglob("*.json")) / 1e6
        print(
            f"generated {args.files} facts ({size:.0f} MB) in {time.perf_counter() - t:.1f} s",
            file=sys.stderr,
        )
        env = os.environ | {"SPECSWEEP_ANALYSIS_CACHE": str(root / "cache")}
        # As installed: byte-compiled once, even where PYTHONDONTWRITEBYTECODE is set (bench/analysis_ab.py).
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "analysis")], check=True)
        cold = [cli_seconds([sweep], root / "out", env, "--no-cache") for _ in range(min(2, args.runs))]
        cli_seconds([sweep], root / "out", env)  # fills the cache (not timed: a cold run that also writes it)
        warm = [cli_seconds([sweep], root / "out", env) for _ in range(args.runs)]
        plots = len(list((root / "out").glob("*.png")))  # of the fleet alone
        # New facts: a sweep of its own (what a night or any new run writes), reported with the
        # fleet; then the same number added to the fleet's folder (a resumed or growing sweep).
        night, grown = [], []
        for i in range(args.runs):
            other = generate(root, args.new, args.repeats, args.prompts, args.max_tokens, sweep=f"night{i}")
            night.append(cli_seconds([sweep, other], root / "out", env))
        for i in range(args.runs):
            generate(root, args.new, args.repeats, args.prompts, args.max_tokens, first_host=100 + i)
            grown.append(cli_seconds([sweep], root / "out", env))
        os.environ["SPECSWEEP_ANALYSIS_CACHE"] = env["SPECSWEEP_ANALYSIS_CACHE"]
        breakdown = phases(sweep, root / "out-phases")
        # Last: the decode floor imports the loader here, which the phases must pay for themselves.
        floor_import = [import_seconds(env) for _ in range(min(3, args.runs))]
        floor_decode = [decode_seconds(sweep) for _ in range(min(3, args.runs))]
    load = os.getloadavg()[0]
    shape = f"{args.repeats} repeats x {args.prompts} prompts x {args.max_tokens} tokens, {size:.0f} MB"
    print(
        f"\n{args.files} fact files ({shape}), {plots} PNGs; {os.cpu_count()} CPUs, load average {load:.1f}"
    )
    print(f"{'row':<58} {'runs':>4} {'median s':>9} {'max s':>7}  target")
    rows = [("floor: start Python, import pandas", floor_import, ""),
            ("floor: read + JSON-decode every file, nothing else", floor_decode, ""),
            ("report --out, cold (--no-cache: parse all, draw all)", cold, ""),
            ("report --out, warm (nothing changed: cached rows, plots)", warm, "<= 3 s"),
            (f"report --out, warm + a new sweep of {args.new} facts", night, "<= 3 s"),
            (f"report --out, warm + {args.new} facts added to the sweep", grown, "<= 3 s")]  # fmt: skip
    for name, times, target in rows:
        print(f"{name:<58} {len(times):>4} {statistics.median(times):>9.2f} {max(times):>7.2f}  {target}")
    print("\nphases of one warm report, in-process:")
    for name, secs in breakdown:
        print(f"  {name:<50} {secs:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
