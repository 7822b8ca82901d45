"""The controller-side fact and plan writer (analysis/facts/record.py) on payloads shaped like the playbook's.

The payload mirrors playbooks/tasks/measure.yml "Sweep | Record ... on the controller" (vars
specsweep_record). fixtures/llama_bench_output_s1.json is a real `benchmark_output`: what
roles/benchmark/files/specsweep_bench.py printed for config s1 against the bundled llama.cpp server.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from factories import server
from local_play import run_local_play

from analysis import files
from analysis.facts import record
from analysis.facts.rows import run_rows
from analysis.facts.schema import Fact, load_fact, to_dict
from analysis.redact import REDACTED
from analysis.sweep.hostplan import dump

FIXTURES = Path(__file__).resolve().parent / "fixtures"
BENCH = json.loads((FIXTURES / "llama_bench_output_s1.json").read_text())
SECRETS = ("s3cr3t-flag", "s3cr3t-eq", "hf_s3cr3t", "sk-s3cr3t")

CONFIG = {"id": "s1", "speculative": True, "algorithm": None, "steps": 1, "topk": None, "draft_tokens": None,
          "env_profile": "default"}  # fmt: skip
ARGV = [
    "/opt/specsweep/llama.cpp-venv/bin/python", "/opt/specsweep/specsweep_llama_server.py",
    "-m", "/opt/specsweep/models/gemma-3-270m-q4_k_m.gguf", "--host", "127.0.0.1", "--port", "8080",
    "--metrics", "--spec-type", "ngram-mod", "--spec-ngram-mod-n-max", "1",
]  # fmt: skip
HOST_FACTS = {"hostname": "vm", "cpu_model": "AMD EPYC", "cpu_count": 2, "mem_total_mib": 24105,
              "kernel": "6.18.44-fc-v782", "python": "3.11.7", "gpus": [], "gpu_driver": None,
              "cuda_version": None, "gpu_topology": None}  # fmt: skip


def payload(**overrides: Any) -> dict[str, Any]:
    """specsweep_record as the playbook sends it for a config that went all the way."""
    base = {
        "sweep_id": "20261130T052259Z",
        "host": "localhost",
        "config": CONFIG,
        "engine": {
            "name": "llama_cpp",
            "model": "/opt/specsweep/models/gemma-3-270m-q4_k_m.gguf",
            "launcher": "nohup",
        },
        "launch": {"argv": ARGV, "env": {}, "log_path": "/var/tmp/specsweep/20261130T052259Z/s1.log"},
        "host_facts": HOST_FACTS,
        "timings": {
            "started_at": 1796016243.222869,
            "ready_at": 1796016251.044848,
            "finished_at": 1796016282.482288,
            "load_s": 5.07,
        },
        "suite": {"git_rev": "a739d14"},
        "benchmark_output": copy.deepcopy(BENCH),
        "failure": None,
    }
    return {**base, **overrides}


def test_a_config_that_ran_is_ok_with_the_clients_runs() -> None:
    fact = record.build_fact(payload())
    assert isinstance(fact, Fact)
    assert (fact.status, fact.failure) == ("ok", None)
    assert fact.engine.version == "b0-unknown"
    assert fact.benchmark is not None and fact.benchmark.concurrency == [1]
    assert [(r.repeat, len(r.requests)) for r in fact.runs] == [(1, 4), (2, 4)]
    assert fact.runs[0].spec.drafted == BENCH["runs"][0]["spec"]["drafted"]
    assert fact.server_info == BENCH["server_info"]
    assert fact.timings.bench_s == pytest.approx(1796016282.482288 - 1796016251.044848)
    assert fact.launch.argv == ARGV
    assert (fact.suite.git_rev, fact.config.id, fact.host) == ("a739d14", "s1", "localhost")


def test_a_fact_survives_the_write_and_the_reader(tmp_path: Path) -> None:
    out = tmp_path / "localhost" / "s1.json"
    fact = record.build_fact(payload())
    files.write_json_atomic(out, to_dict(fact))
    assert load_fact(json.loads(out.read_text())) == fact
    assert sorted(p.name for p in out.parent.iterdir()) == ["s1.json"], "a temp file was left behind"


def test_write_json_atomic_replaces_and_leaves_no_temp_file(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    out.write_text("{half a docu")
    files.write_json_atomic(out, {"b": 1, "a": [1, 2]})
    assert json.loads(out.read_text()) == {"a": [1, 2], "b": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]


def test_a_server_that_never_became_healthy_is_a_failed_load() -> None:
    log_tail = ["0.00.014.068 E srv    load_model: failed to load model, '/nonexistent.gguf'"]
    failure = {
        "phase": "load",
        # specsweep_wait's fail_json, as ansible_failed_result carries it
        "result": {"failed": True, "ready": False, "cause": "model_not_found", "log_tail": log_tail,
                   "msg": f"server exited while loading (model_not_found): {log_tail[0]}", "attempts": 1,
                   "invocation": {"module_args": {"api_key": "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"}}},
        "log_tail": ["the rescue's own tail is not needed when the module sent one"],
    }  # fmt: skip
    timings = {"started_at": 1796016243.2, "ready_at": None, "finished_at": 1796016245.0, "load_s": None}
    fact = record.build_fact(payload(benchmark_output=None, failure=failure, timings=timings))
    assert fact.status == "failed"
    assert fact.failure is not None
    assert (fact.failure.phase, fact.failure.cause) == ("load", "model_not_found")
    assert fact.failure.message == f"server exited while loading (model_not_found): {log_tail[0]}"
    assert fact.failure.log_tail == log_tail
    assert (fact.runs, fact.benchmark, fact.engine.version) == ([], None, None)
    assert fact.timings.bench_s is None


def test_a_benchmark_that_failed_midway_keeps_its_finished_runs() -> None:
    # The client's failure document (specsweep_bench.main): the message format is the client's own,
    # and repeat 1 is the real run from the fixture.
    error = (
        "every request failed (concurrency 1, repeat 2): "
        "ConnectionRefusedError: [Errno 111] Connection refused"
    )
    stdout = json.dumps({"error": error, "runs": BENCH["runs"][:1]})
    failure = {
        "phase": "benchmark",
        "result": {"failed": True, "rc": 1, "msg": "non-zero return code", "stdout": stdout, "stderr": ""},
        "log_tail": ["0.29.290.203 I slot      release: id  0 | task 128 | stop processing"],
    }
    fact = record.build_fact(payload(benchmark_output=None, failure=failure))
    assert fact.status == "failed"
    assert fact.failure is not None
    assert (fact.failure.phase, fact.failure.cause, fact.failure.message) == (
        "benchmark",
        "benchmark_failed",
        error,
    )
    assert fact.failure.log_tail == failure["log_tail"]
    assert [r.repeat for r in fact.runs] == [1]
    assert fact.runs[0].requests[0].text == BENCH["runs"][0]["requests"][0]["text"]
    assert fact.benchmark is None


def test_a_server_that_died_mid_benchmark_fails_its_level_and_keeps_the_levels_before() -> None:
    # What specsweep_bench.py prints when stopped (SIGTERM after its server died): the finished runs
    # (concurrency 1, from the fixture) and the level it was in; the job's message names the death.
    stdout = json.dumps({"error": "stopped by SIGTERM", "runs": BENCH["runs"][:1],
                         "level": {"concurrency": 4, "repeat": 1, "workload": None}})  # fmt: skip
    msg = "server exited (signal 9: SIGKILL) during benchmark, repeat 1/1 at concurrency 4"
    result = {"failed": True, "cause": "server_exited", "msg": msg, "exit": {"signal": 9}, "stdout": stdout}
    fact = record.build_fact(payload(benchmark_output=None, failure={"phase": "benchmark", "result": result}))
    assert fact.failure is not None
    assert (fact.failure.cause, fact.failure.message, fact.failure.concurrency) == ("server_exited", msg, 4)
    assert [(r.concurrency, r.repeat) for r in fact.runs] == [(1, 1)]
    # Its failure row stands at that level only: level 1 keeps its good run and no failure.
    rows = run_rows("s1.json", fact)
    assert [(r.get("concurrency"), r["failed"]) for r in rows] == [(1, False), (4, True)]


def test_a_benchmark_that_printed_no_json_is_failed_without_runs() -> None:
    failure = {"phase": "benchmark", "result": {"failed": True, "rc": 2, "msg": "non-zero return code",
                                              "stdout": "Traceback (most recent call last):"}}  # fmt: skip
    fact = record.build_fact(payload(benchmark_output=None, failure=failure))
    assert fact.failure is not None
    assert (fact.status, fact.failure.message, fact.runs) == ("failed", "non-zero return code", [])


def test_secrets_are_redacted_and_written_nowhere(tmp_path: Path) -> None:
    launch = {
        "argv": [*ARGV, "--api-key", "s3cr3t-flag", "--api-key=s3cr3t-eq", "--alias", "m"],
        "env": {"NCCL_X": "1", "HF_TOKEN": "hf_s3cr3t", "OPENAI_API_KEY": "sk-s3cr3t"},
        "log_path": None,
    }
    fact = record.build_fact(payload(launch=launch))
    assert fact.launch.argv[len(ARGV) :] == ["--api-key", REDACTED, f"--api-key={REDACTED}", "--alias", "m"]
    assert fact.launch.env == {"NCCL_X": "1", "HF_TOKEN": REDACTED, "OPENAI_API_KEY": REDACTED}
    out = tmp_path / "s1.json"
    files.write_json_atomic(out, to_dict(fact))
    text = out.read_text()
    assert [s for s in SECRETS if s in text] == []


def test_a_malformed_payload_fails_loudly() -> None:
    bad = copy.deepcopy(BENCH)
    bad["runs"][0]["duration_s"] = "twelve"
    with pytest.raises(ValueError, match=r"runs\[0\]\.duration_s: expected `float`, got `str`"):
        record.build_fact(payload(benchmark_output=bad))


# --------------------------------------------------------------------------------------
# plan.json
# --------------------------------------------------------------------------------------

BASELINE = {**CONFIG, "id": "baseline", "speculative": False, "steps": None}


def run_payload(**overrides: Any) -> dict[str, Any]:
    """What a config's tasks registered, as playbooks/tasks/measure.yml hands it to the record action."""
    base = {
        "sweep_id": "20261130T052259Z",
        "host": "localhost",
        "config": CONFIG,
        "launch": {"argv": ARGV, "env": {}},
        "server": dump(server(version="b0-unknown")),
        "preflight": {"host_facts": HOST_FACTS},
        "handle": {"launcher": "nohup", "log": "/var/tmp/specsweep/20261130T052259Z/s1.log"},
        "started_at": 1796016243.2,
        "ready": {"ready": True, "ready_at": 1796016251.0, "elapsed_s": 5.07},
        "benchmark_output": copy.deepcopy(BENCH),
        "suite": {"git_rev": "a739d14"},
    }
    return {**base, **overrides}


def test_the_results_action_writes_the_fact_before_the_next_config_and_marks_it_for_followers(
    tmp_path: Path,
) -> None:
    sweep = tmp_path / "nightly"
    where = {"dir": str(sweep), "run_id": "run1", "host": "localhost", "follows": None, "followed": True}
    proc = run_local_play(tmp_path, [
        {"specsweep_results": {"fact": run_payload(), "where": where}, "register": "recorded"},
        {"ansible.builtin.assert": {"that": ["recorded.status == 'ok'",
                                             "recorded.specsweep_say == 's1: recorded'"]}},
    ])  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    fact = load_fact(json.loads((sweep / "localhost" / "s1.json").read_text()))
    assert (fact.runs[1].repeat, fact.engine.launcher, fact.timings.load_s) == (2, "nohup", 5.07)
    assert (sweep / ".claims" / "run1" / "localhost-s1.recorded").is_file()  # what a follower waits for


def test_the_results_action_refuses_a_malformed_fact_and_writes_nothing(tmp_path: Path) -> None:
    bad = copy.deepcopy(BENCH)
    bad["runs"][0]["duration_s"] = "twelve"
    where = {"dir": str(tmp_path), "run_id": "run1", "host": "localhost", "follows": None, "followed": False}
    out = tmp_path / "localhost" / "s1.json"
    task = {"specsweep_results": {"fact": run_payload(benchmark_output=bad), "where": where}}
    proc = run_local_play(tmp_path, [task])
    assert proc.returncode == 2
    assert "runs[0].duration_s: expected `float`, got `str`" in proc.stdout + proc.stderr
    assert not out.exists()


@pytest.fixture
def tiny_fs(tmp_path: Path):
    """A 2 MiB tmpfs (the test runs as root, as the suite's tests do)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_a_full_results_disk_is_found_at_plan_time_and_a_failed_write_leaves_no_temp_file(
    tiny_fs: Path,
) -> None:
    problem = record.space_problem(tiny_fs / "sweep-1", facts=4)
    assert problem == (
        f"results_dir: {tiny_fs} has 2.0 MiB free, and this sweep's 4 fact(s) need about 20 MiB; free some "
        "space or give another -e results_dir"
    )
    assert record.space_problem(tiny_fs, facts=0) is not None  # the sweep's own files need 16 MiB
    with pytest.raises(OSError, match="No space left on device"):
        files.write_json_atomic(tiny_fs / "h1" / "s1.json", {"text": "x" * (3 << 20)})
    assert list((tiny_fs / "h1").iterdir()) == []


def test_a_later_launchs_lines_name_it_as_its_file_does(tmp_path: Path) -> None:
    # Before, baseline's second launch was said as "localhost/baseline" while its file is baseline.launch2.
    sweep = tmp_path / "S"
    where = {"dir": str(sweep), "run_id": "run1", "host": "localhost", "follows": None, "followed": False,
             "run_dir": "/var/tmp/specsweep/run"}  # fmt: skip
    second = run_payload(config=BASELINE, launch_index=2)
    failed = {"msg": "server exited (signal 9: SIGKILL) during benchmark", "cause": "server_exited"}
    (tmp_path / "not-a-folder").write_text("")  # no fact can be written under it, as on a full disk
    unwritable = {**where, "dir": str(tmp_path / "not-a-folder"), "host": "h2"}
    say = "{{ [ok, failed, kept] | map(attribute='specsweep_say') | to_json }}"
    proc = run_local_play(tmp_path, [
        {"specsweep_results": {"fact": second, "where": where}, "register": "ok"},
        {"specsweep_results": {"fact": second, "where": where, "failed_result": failed},
         "register": "failed"},
        {"specsweep_results": {"fact": second, "where": unwritable}, "register": "kept"},
        {"ansible.builtin.copy": {"dest": str(tmp_path / "said.json"), "mode": "0644", "content": say}},
    ])  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    said = json.loads((tmp_path / "said.json").read_text())
    assert said[0] == "baseline.launch2: recorded"
    assert said[1].startswith("baseline.launch2: failed in benchmark: server_exited (server exited")
    assert said[2].startswith("h2/baseline.launch2: fact not written to "), said[2]
