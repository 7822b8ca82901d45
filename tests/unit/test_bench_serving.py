"""benchmark_client sglang: roles/benchmark/files/specsweep_bench_serving.py, checked against the
sglang 0.5.23 wheel's bench_serving source (flags, result keys, dataset shuffle) and run end to end
with a stand-in for the SGLang python that replays a bench_serving JSONL.

fixtures/sglang_bench_serving_s2-k1-d3.jsonl is written, not recorded: two runs (concurrency 1,
4 prompts, --sharegpt-output-len 8, --output-details) with the keys of serving.py's benchmark()
and the arithmetic of its calculate_metrics; results in bench_serving's (shuffled) order.
"""

from __future__ import annotations

import ast
import http.server
import importlib.util
import json
import os
import random
import socket
import sys
import threading
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from sglang_wheel import sglang_source

from analysis.facts import record
from analysis.facts.rows import run_rows
from analysis.facts.schema import Fact, ServerLoad, from_dict, load_fact, to_dict
from analysis.sweep.client import client_argv, launch_argv

REPO = Path(__file__).resolve().parents[2]
FILES = REPO / "roles/benchmark/files"
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "sglang_bench_serving_s2-k1-d3.jsonl"
PROMPTS = FILES / "prompts/code.jsonl"
PROMPT_IDS = ["python-repeat", "yaml-services", "sql-schema", "markdown-table"]
URL = "http://127.0.0.1:30000"
SGLANG_PY = "/opt/sglang/.venv/bin/python"
CONFIG = {"id": "s2-k1-d3", "speculative": True, "algorithm": "EAGLE3", "steps": 2, "topk": 1,
          "draft_tokens": 3, "env_profile": "default"}  # fmt: skip


def load_adapter() -> ModuleType:
    """Import the adapter script as the host runs it: beside specsweep_bench.py."""
    sys.path.insert(0, str(FILES))
    try:
        path = FILES / "specsweep_bench_serving.py"
        spec = importlib.util.spec_from_file_location("specsweep_bench_serving", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(FILES))
    return module


bs = load_adapter()


def fixture_lines() -> list[dict[str, Any]]:
    """The two bench_serving result lines of the fixture."""
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


# --------------------------------------------------------------------------------------
# bench_serving's own source (sglang 0.5.23 wheel, unpacked, never imported)
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def bench_src() -> Path:
    """sglang/benchmark (+ sglang/bench_serving.py) of the 0.5.23 wheel, cached under .cache/."""
    return sglang_source("sglang/bench_serving.py", "sglang/benchmark/")


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    """The top-level function `name` of a parsed module."""
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef)
    found = [n for n in tree.body if isinstance(n, kinds) and n.name == name]
    assert found, f"{name} not found"
    return found[0]  # type: ignore[return-value]


def parser_flags(serving: Path) -> dict[str, str]:
    """{--flag: 'switch' | 'int' | 'float' | 'value'} from cli_main's add_argument calls."""
    flags: dict[str, str] = {}
    for node in ast.walk(_function(ast.parse(serving.read_text()), "cli_main")):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr != "add_argument":
            continue
        kw = {k.arg: k.value for k in node.keywords}
        action = kw.get("action")
        tp = kw.get("type")
        if isinstance(action, ast.Constant) and action.value in ("store_true", "store_false"):
            kind = "switch"
        elif isinstance(tp, ast.Name) and tp.id in ("int", "float") and "nargs" not in kw:
            kind = tp.id
        else:
            kind = "value"
        for arg in node.args:
            if isinstance(arg, ast.Constant) and str(arg.value).startswith("--"):
                flags[arg.value] = kind
    return flags


def choices_of(serving: Path, flag: str) -> list[str]:
    """The literal `choices=[...]` of one add_argument call."""
    for node in ast.walk(_function(ast.parse(serving.read_text()), "cli_main")):
        first = node.args[0] if isinstance(node, ast.Call) and node.args else None
        if isinstance(node, ast.Call) and isinstance(first, ast.Constant) and first.value == flag:
            kw = {k.arg: k.value for k in node.keywords}
            return list(ast.literal_eval(kw["choices"]))
    raise AssertionError(f"{flag} not found")


def assert_bench_serving_accepts(argv: list[str], flags: dict[str, str]) -> None:
    """argv runs the module under exact flag spellings; switches take no value, numbers parse."""
    assert argv[1:3] == ["-m", "sglang.bench_serving"]
    rest, i = argv[3:], 0
    while i < len(rest):
        flag = rest[i]
        assert flag in flags, f"{flag} is not a bench_serving 0.5.23 flag"
        if flags[flag] == "switch":
            i += 1
            continue
        assert i + 1 < len(rest) and not rest[i + 1].startswith("--"), f"{flag} got no value"
        if flags[flag] in ("int", "float"):
            {"int": int, "float": float}[flags[flag]](rest[i + 1])
        i += 2


def test_the_module_we_run_is_bench_serving_cli(bench_src: Path) -> None:
    alias = (bench_src / "bench_serving.py").read_text()
    assert "from sglang.benchmark.serving import cli_main" in alias
    assert 'if __name__ == "__main__":\n    cli_main()' in alias


def test_every_flag_of_the_argv_is_a_bench_serving_flag(bench_src: Path) -> None:
    serving = bench_src / "benchmark" / "serving.py"
    flags = parser_flags(serving)
    assert flags["--output-details"] == "switch" and flags["--max-concurrency"] == "int"  # the parse works
    argv = bs.bench_argv(SGLANG_PY, URL, "/w/ds.json", 32, 96, 8, 1, "/w/s1.bench_serving.jsonl",
                         ["--apply-chat-template"], seed=7, rate=2.5)  # fmt: skip
    assert_bench_serving_accepts(argv, flags)
    assert "sharegpt" in choices_of(serving, "--dataset-name")
    # --backend's choices are ASYNC_REQUEST_FUNCS' keys; its sglang entry posts to /generate.
    source = serving.read_text()
    assert '    "sglang": async_request_sglang_generate,' in source
    assert '    "sglang": "/generate",' in source


def test_reserved_flags_exist_and_their_abbreviations_are_refused(bench_src: Path) -> None:
    flags = parser_flags(bench_src / "benchmark" / "serving.py")
    assert set(bs.RESERVED) <= set(flags)
    assert bs.extra_problem(["--apply-chat-template"]) is None
    for extra in (
        ["--request-rate", "16"],
        ["--seed", "1"],
        ["--max-conc=4"],
        ["--output-f", "x"],
        ["--disable-stream"],
    ):
        problem = bs.extra_problem(extra)
        assert problem is not None and extra[0].split("=")[0] in problem


def test_result_keys_we_read_are_what_bench_serving_writes(bench_src: Path) -> None:
    """benchmark() builds `result` and `result_details` as dict literals: our keys are among them."""
    tree = _function(ast.parse((bench_src / "benchmark" / "serving.py").read_text()), "benchmark")
    keys = {
        k.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Dict)
        for k in node.keys
        if isinstance(k, ast.Constant)
    }
    read = {*bs.DETAILS, "duration", "accept_length", "server_info", "max_concurrency"}
    assert read <= keys, read - keys
    assert set(fixture_lines()[0]) <= keys  # the fixture has no key bench_serving lacks


@dataclass
class _Row:
    """sglang.benchmark.datasets.common.DatasetRow, as far as the sampler uses it."""

    prompt: Any
    prompt_len: int
    output_len: int


class _Tokenizer:
    """Whitespace tokens: enough for the sampler's length checks."""

    def encode(self, text: str) -> list[str]:
        return text.split()


def test_bench_order_is_the_order_bench_serving_sends_the_prompts_in(bench_src: Path, tmp_path: Path) -> None:
    """Run the wheel's sample_sharegpt_requests on our dataset file after random.seed(--seed)."""
    source = ast.parse((bench_src / "benchmark" / "datasets" / "sharegpt.py").read_text())
    sampler = ast.Module(body=[_function(source, "sample_sharegpt_requests")], type_ignores=[])
    ns: dict[str, Any] = {"random": random, "json": json, "List": list, "Optional": Any, "DatasetRow": _Row,
                          "PreTrainedTokenizerBase": object, "np": types.SimpleNamespace(sum=sum),
                          "is_file_valid_json": lambda p: True, "ASSISTANT_SUFFIX": "Assistant:"}  # fmt: skip
    exec(compile(sampler, "sharegpt.py", "exec"), ns)
    prompts = [json.loads(line) for line in PROMPTS.read_text().splitlines()]
    dataset = tmp_path / "code.sharegpt.json"
    dataset.write_text(json.dumps(bs.sharegpt_dataset(prompts)))
    state = random.getstate()
    try:
        random.seed(bs.SEED)
        rows = ns["sample_sharegpt_requests"](str(dataset), len(prompts), _Tokenizer(), fixed_output_len=96)
    finally:
        random.setstate(state)
    order = bs.bench_order(len(prompts))
    assert order != sorted(order)  # the test means something only if the shuffle moves prompts
    assert [r.prompt for r in rows] == [prompts[i]["prompt"] for i in order]
    assert {r.output_len for r in rows} == {96}


def test_nothing_draws_random_numbers_between_the_seed_and_the_dataset(bench_src: Path) -> None:
    body = _function(ast.parse((bench_src / "benchmark" / "serving.py").read_text()), "run_benchmark").body
    text = [ast.unparse(stmt) for stmt in body]
    start = text.index("random.seed(args.seed)")
    end = next(i for i, t in enumerate(text) if "get_dataset(args, tokenizer, model_id)" in t)
    between = "\n".join(text[start + 1 : end])
    assert "random." not in between.replace("np.random.seed(args.seed)", "")


# --------------------------------------------------------------------------------------
# JSONL -> the client document -> a fact
# --------------------------------------------------------------------------------------


def test_a_result_line_becomes_a_run_in_prompt_order() -> None:
    line = fixture_lines()[0]
    run, numbers = bs.convert_line(line, PROMPT_IDS, repeat=1, concurrency=1)
    # bench_serving sent the prompts as order [2, 1, 3, 0]: its first result is sql-schema's.
    assert bs.bench_order(4) == [2, 1, 3, 0]
    assert [r["prompt_id"] for r in run["requests"]] == PROMPT_IDS
    by_id = {r["prompt_id"]: r for r in run["requests"]}
    assert by_id["sql-schema"]["text"] == line["generated_texts"][0] == "\n    created_at TIMESTAMP NOT NULL,"
    assert by_id["python-repeat"]["text"].startswith("    for part in line")
    sql = by_id["sql-schema"]
    assert sql["ttft_s"] == line["ttfts"][0]
    assert sql["itl_s"] == line["itls"][0] and len(sql["itl_s"]) == 7
    assert sql["e2e_s"] == pytest.approx(line["ttfts"][0] + sum(line["itls"][0]))
    assert sql["decode_tps"] == pytest.approx(7 / sum(line["itls"][0]))
    assert sql["output_tokens"] == 8 and sql["error"] is None
    assert run["duration_s"] == line["duration"] and run["concurrency"] == 1 and run["repeat"] == 1
    assert run["spec"] == {"drafted": None, "accepted": None, "verify_steps": None, "accept_length": 2.37,
                           "accept_rate": None}  # fmt: skip
    assert numbers["output_throughput"] == line["output_throughput"]
    assert numbers["median_itl_ms"] == line["median_itl_ms"]
    assert numbers["request_rate"] == "inf"
    assert not {"server_info", "itls", "ttfts", "generated_texts"} & set(numbers)


def test_failed_requests_keep_the_last_line_of_their_error() -> None:
    line = fixture_lines()[1]
    line["errors"][3] = 'Traceback (most recent call last):\n  File "x.py"\naiohttp.ClientOSError: reset'
    line["output_lens"][3], line["ttfts"][3], line["itls"][3], line["generated_texts"][3] = 0, 0.0, [], ""
    run, _ = bs.convert_line(line, PROMPT_IDS, repeat=2, concurrency=1)
    failed = next(r for r in run["requests"] if r["error"])
    assert failed["prompt_id"] == PROMPT_IDS[bs.bench_order(4)[3]] == "python-repeat"
    assert failed["error"] == "aiohttp.ClientOSError: reset"
    assert failed["output_tokens"] == 0 and failed["decode_tps"] is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda line: line.pop("itls"), "lacks itls"),
        (lambda line: line["ttfts"].pop(), "results for 4 prompts"),
    ],
)
def test_a_line_without_details_or_with_missing_results_is_refused(change: Any, message: str) -> None:
    line = fixture_lines()[0]
    change(line)
    with pytest.raises(bs.BenchError, match=message):
        bs.convert_line(line, PROMPT_IDS, repeat=1, concurrency=1)


FAKE_SGLANG = """#!{python}
# Stand-in for the SGLang python: `-m sglang.bench_serving ...` appends the next fixture line
# (or the line given by FAKE_LINE_JSON) to --output-file and logs its argv. With FAKE_HITS_URL it
# runs until the server's /metrics has been read three more times (so a whole read lies inside
# its run) and writes its own duration, as bench_serving does.
import json, os, sys, time, urllib.request
started = time.time()
hits = os.environ.get("FAKE_HITS_URL")
read = lambda: int(urllib.request.urlopen(hits).read())
until = read() + 3 if hits else 0
while hits and read() < until and time.time() < started + 30:
    time.sleep(0.05)
argv = sys.argv[1:]
with open(os.environ["FAKE_ARGV_LOG"], "a") as fh:
    fh.write(json.dumps(argv) + "\\n")
out = argv[argv.index("--output-file") + 1]
done = sum(1 for _ in open(out)) if os.path.exists(out) else 0
lines = open(os.environ["FAKE_FIXTURE"]).read().splitlines()
line = os.environ.get("FAKE_LINE_JSON") or lines[done]
if hits:
    line = json.dumps({{**json.loads(line), "duration": time.time() - started}})
print("============ Serving Benchmark Result ============")
print("auth", os.environ.get("OPENAI_API_KEY"))
with open(out, "a") as fh:
    fh.write(line + "\\n")
sys.exit(int(os.environ.get("FAKE_RC", "0")))
"""


@pytest.fixture
def fake_sglang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An executable that behaves like `python -m sglang.bench_serving` with --output-details."""
    exe = tmp_path / "sglang-python"
    exe.write_text(FAKE_SGLANG.format(python=sys.executable))
    exe.chmod(0o755)
    monkeypatch.setenv("FAKE_ARGV_LOG", str(tmp_path / "argv.log"))
    monkeypatch.setenv("FAKE_FIXTURE", str(FIXTURE))
    monkeypatch.setenv("SPECSWEEP_API_KEY", "sk-test")
    return exe


def run_adapter(exe: Path, tmp_path: Path, *extra: str, url: str = URL) -> tuple[int, dict[str, Any]]:
    """main() for concurrency 1, 2 repeats, 8 tokens; (exit code, the printed document)."""
    out = tmp_path / "s2-k1-d3.bench.json"
    argv = [f"--sglang-python={exe}", f"--url={url}", f"--prompts={PROMPTS}", "--max-tokens=8",
            "--warmup=1", "--repeats=2", "--concurrency=1", f"--output={out}",
            "--api-key-env=SPECSWEEP_API_KEY", f"--jsonl={tmp_path / 's2-k1-d3.bench_serving.jsonl'}",
            *extra]  # fmt: skip
    rc = bs.main(argv)
    return rc, json.loads(out.read_text())


def test_main_runs_bench_serving_per_repeat_with_these_exact_argvs(fake_sglang: Path, tmp_path: Path) -> None:
    jsonl = tmp_path / "s2-k1-d3.bench_serving.jsonl"
    jsonl.write_text("a stale line from an earlier attempt\n")
    rc, doc = run_adapter(fake_sglang, tmp_path, "--request-rate=16", "--extra-arg=--apply-chat-template")
    assert rc == 0, doc.get("error")
    argvs = [json.loads(line) for line in (tmp_path / "argv.log").read_text().splitlines()]
    dataset = str(tmp_path / "s2-k1-d3.bench_serving.sharegpt.json")

    def expected(warmup: int) -> list[str]:
        return ["-m", "sglang.bench_serving", "--backend", "sglang", "--base-url", URL,
                "--dataset-name", "sharegpt", "--dataset-path", dataset, "--num-prompts", "4",
                "--sharegpt-output-len", "8", "--max-concurrency", "1", "--request-rate", "16.0",
                "--warmup-requests", str(warmup), "--flush-cache", "--seed", "42", "--output-file",
                str(jsonl), "--output-details", "--disable-tqdm", "--apply-chat-template"]  # fmt: skip

    # Warm-up once per config, as specsweep_bench.py does.
    assert argvs == [expected(1), expected(0)]
    assert jsonl.read_text().splitlines() == FIXTURE.read_text().splitlines()  # raw kept, stale line gone
    shared = json.loads(Path(dataset).read_text())  # the last run's: the records drawn, in that order
    drawn = bs.record_sampler([{"id": p} for p in PROMPT_IDS], bs.level_key(42, 1, 2))
    assert [d["id"] for d in shared] == [drawn()["id"] for _ in PROMPT_IDS]
    assert sorted(d["id"] for d in shared) == sorted(PROMPT_IDS)  # max(4 x 1, 4 prompts): one pass
    log = (tmp_path / "s2-k1-d3.bench_serving.log").read_text()
    assert log.count("Serving Benchmark Result") == 2 and "auth sk-test" in log  # key via env, not argv
    assert "sk-test" not in json.dumps(argvs)
    assert [(r["concurrency"], r["repeat"]) for r in doc["runs"]] == [(1, 1), (1, 2)]
    assert doc["benchmark"]["client"] == "sglang.bench_serving"
    assert doc["engine_version"] == "0.5.23"
    json.dumps(doc, allow_nan=False)  # strict JSON: bench_serving's Infinity did not leak through


def test_the_document_is_a_valid_fact_that_reads_like_any_other(fake_sglang: Path, tmp_path: Path) -> None:
    rc, doc = run_adapter(fake_sglang, tmp_path)
    assert rc == 0
    payload = {
        "sweep_id": "20261201T000000Z",
        "host": "gpu-node-1",
        "config": CONFIG,
        "engine": {"name": "sglang", "version": None, "model": "/data/models/Qwen3-8B", "launcher": "nohup"},
        "launch": {"argv": [SGLANG_PY, "-m", "sglang.launch_server", "--api-key", "sk-test"], "env": {}},
        "host_facts": {"hostname": "gpu-node-1"},
        "timings": {"started_at": 1.0, "ready_at": 2.0, "finished_at": 9.0},
        "benchmark_output": doc,
        "failure": None,
    }
    fact = record.build_fact(payload)
    assert isinstance(fact, Fact) and fact.status == "ok"
    assert fact == load_fact(json.loads(json.dumps(to_dict(fact))))
    assert fact.engine.version == "0.5.23"
    assert fact.benchmark is not None and fact.benchmark.client == "sglang.bench_serving"
    assert fact.server_info["step_time_dict"] == {"1": [0.0212, 0.0209, 0.0214]}
    kept = fact.server_info["bench_serving_runs"]
    lines = fixture_lines()
    assert [k["output_throughput"] for k in kept] == [ln["output_throughput"] for ln in lines]
    rows = run_rows("f.json", fact)
    assert [r["accept_length"] for r in rows] == [2.37, 2.29]
    assert all(r["run_ok"] and r["n_requests"] == 4 for r in rows)
    assert rows[0]["step_time_ms"] == pytest.approx(21.2)
    tps = sorted(7 / sum(itl) for itl in lines[0]["itls"])
    assert rows[0]["decode_tps"] == pytest.approx((tps[1] + tps[2]) / 2)


@pytest.fixture
def sglang_metrics() -> Iterator[str]:
    """A local server answering /metrics with SGLang's exposition at level 64 with 48 running (the
    speculative cap) and 16 queued; /hits says how often /metrics was read."""
    body = (Path(__file__).resolve().parent / "fixtures" / "serverload" / "sglang_tp8.txt").read_bytes()
    hits = [0]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                hits[0] += 1
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body if self.path == "/metrics" else str(hits[0]).encode())

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_each_run_records_the_servers_own_running_and_queued_requests(
    fake_sglang: Path, tmp_path: Path, sglang_metrics: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_HITS_URL", sglang_metrics + "/hits")
    rc, doc = run_adapter(fake_sglang, tmp_path, url=sglang_metrics)
    assert rc == 0, doc.get("error")
    for run in doc["runs"]:
        load = from_dict(ServerLoad, run["server_load"])
        assert load.samples >= 1 and (load.running_mean, load.queued_max) == (48.0, 16.0), run["server_load"]
        names = (load.running_metric, load.queued_metric)
        assert names == ("sglang:num_running_reqs", "sglang:num_queue_reqs")


def test_a_run_without_the_servers_metrics_has_no_server_figure(fake_sglang: Path, tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    rc, doc = run_adapter(fake_sglang, tmp_path, url=f"http://127.0.0.1:{port}")
    assert rc == 0 and [run["server_load"] for run in doc["runs"]] == [None, None]


def test_the_window_is_bench_serving_s_duration_up_to_its_result_line(tmp_path: Path) -> None:
    jsonl = tmp_path / "r.bench_serving.jsonl"
    jsonl.write_text("{}\n")
    os.utime(jsonl, (1000.0, 1000.0))
    assert bs.bench_window(str(jsonl), 12.5) == (987.5, 1000.0)


def test_a_failed_bench_serving_is_an_error_naming_the_run(
    fake_sglang: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_RC", "1")
    rc, doc = run_adapter(fake_sglang, tmp_path)
    assert rc == 1 and doc["runs"] == []
    assert doc["error"].startswith("concurrency 1, repeat 1: bench_serving exited 1: ")
    assert "Serving Benchmark Result" in doc["error"]


def test_a_run_where_every_request_failed_stops_the_config(
    fake_sglang: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = fixture_lines()[0]
    cause = "Bad Request: {'error': 'model not loaded'}"
    line["errors"] = [cause] * 4
    line["output_lens"] = [0] * 4
    monkeypatch.setenv("FAKE_LINE_JSON", json.dumps(line))
    rc, doc = run_adapter(fake_sglang, tmp_path)
    assert rc == 1
    assert doc["error"] == f"every request failed (concurrency 1, repeat 1): {cause}"


def test_reserved_extra_args_fail_before_anything_runs(fake_sglang: Path, tmp_path: Path) -> None:
    rc, doc = run_adapter(fake_sglang, tmp_path, "--extra-arg=--seed", "--extra-arg=7")
    assert rc == 1 and "--seed is set by specsweep" in doc["error"]
    assert not (tmp_path / "argv.log").exists()


def test_too_few_tokens_for_bench_serving_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        bs.parse_args(["--sglang-python=p", f"--url={URL}", f"--prompts={PROMPTS}", "--max-tokens=3",
                       f"--jsonl={tmp_path / 'x.jsonl'}"])  # fmt: skip


def test_adapter_is_python_3_9_syntax() -> None:
    source = (FILES / "specsweep_bench_serving.py").read_text()
    ast.parse(source, feature_version=(3, 9))
    assert "from __future__ import annotations" in source


# --------------------------------------------------------------------------------------
# The role passes only flags the adapter knows
# --------------------------------------------------------------------------------------


def test_role_argv_passes_only_options_the_adapter_knows() -> None:
    # What the role hands analysis.sweep.client for the adapter, its variables' defaults filled in.
    settings = {
        "client": "sglang", "python": "/usr/bin/python3", "work_dir": "/var/tmp/specsweep/bench",
        "engine": "sglang", "url": "http://127.0.0.1:30000", "prompt_set": "prompts/code.jsonl",
        "max_tokens": 96, "warmup": 1, "repeats": 3, "request_timeout_s": 300, "concurrency": [1, 4],
        "sglang_python": "/opt/sglang/bin/python", "sglang_extra_args": ["--seed-extra"],
    }  # fmt: skip
    launch = {
        "argv": client_argv(settings),
        "client": "sglang",
        "output": "/o.bench.json",
        "sglang_jsonl": "/o.jsonl",
    }
    argv = launch_argv(launch)
    assert argv[1] == "/var/tmp/specsweep/bench/specsweep_bench_serving.py"
    options = {a.split("=", 1)[0] for a in argv[2:]}
    # The adapter's options, from its own parser.
    parser_options = {o for o in bs.build_parser()._option_string_actions if o.startswith("--")}
    assert options <= parser_options, options - parser_options
    assert {
        "--sglang-python",
        "--jsonl",
        "--extra-arg",
        "--concurrency",
        "--url",
        "--prompts",
        "--max-tokens",
    } <= options
    specs = yaml.safe_load((REPO / "roles/benchmark/meta/argument_specs.yml").read_text())
    client = specs["argument_specs"]["main"]["options"]["benchmark_client"]
    assert client["choices"] == ["specsweep", "sglang"] and client["default"] == "specsweep"
    defaults = yaml.safe_load((REPO / "roles/benchmark/defaults/main.yml").read_text())
    assert defaults["benchmark_client"] == "specsweep" and defaults["benchmark_sglang_extra_args"] == []


def test_bench_serving_has_no_duration_mode_so_the_adapter_refuses_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        bs.parse_args(["--sglang-python=p", f"--url={URL}", f"--prompts={PROMPTS}", "--max-tokens=8",
                       f"--jsonl={tmp_path / 'x.jsonl'}", "--duration-s=30"])  # fmt: skip
    assert "bench_serving sends a number of prompts (use --requests)" in capsys.readouterr().err
