"""A config's run on a host as the fact writer's payload (analysis.sweep.outcome), from what the
playbook's tasks registered (playbooks/tasks/measure.yml, vars specsweep_fact)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from factories import host_plan, server
from local_play import run_local_play

from analysis.facts import record
from analysis.sweep import outcome
from analysis.sweep.hostplan import PlanError, dump

FIXTURES = Path(__file__).resolve().parent / "fixtures"
BENCH = json.loads((FIXTURES / "llama_bench_output_s1.json").read_text())
CONFIG = {"id": "s1", "speculative": True, "algorithm": None, "steps": 1, "topk": None, "draft_tokens": None,
          "adaptive": False, "env_profile": "default"}  # fmt: skip
ARGV = ["/opt/specsweep/llama.cpp-venv/bin/python", "/opt/specsweep/launcher.py", "-m", "/m.gguf"]
SERVER = dump(server())
HANDLE = {"launcher": "nohup", "log": "/var/tmp/specsweep/sw/s1.log", "pidfile": "/var/tmp/specsweep/s.pid"}
READY = {"ready": True, "ready_at": 1796016251.0, "elapsed_s": 5.07}
HOST_FACTS = {"hostname": "vm", "cpu_count": 2}


def run(**overrides: Any) -> dict[str, Any]:
    """specsweep_fact of a config that went all the way."""
    return {
        "sweep_id": "sw",
        "host": "vm",
        "config": CONFIG,
        "launch": {"argv": ARGV, "env": {"LLAMA_ARG_THREADS": "1"}},
        "server": SERVER,
        "preflight": {"host_facts": HOST_FACTS, "problems": []},
        "handle": HANDLE,
        "started_at": "1796016243.5",  # templated: a string
        "ready": READY,
        "benchmark_output": BENCH,
        "suite": {"git_rev": "abc123"},
    } | overrides


@pytest.mark.parametrize(
    ("handle", "ready", "phase"),
    [
        ({}, {}, "launch"),
        (HANDLE, {}, "load"),
        (HANDLE, {"ready": False, "elapsed_s": 30.0}, "load"),
        (HANDLE, READY, "benchmark"),
    ],
)
def test_the_phase_of_a_failure_is_where_the_config_stopped(
    handle: dict[str, Any], ready: dict[str, Any], phase: str
) -> None:
    assert outcome.phase(handle, ready) == phase


def test_a_config_that_ran_becomes_an_ok_fact() -> None:
    before = time.time()
    built = outcome.payload(run(), None, [])
    finished = built["timings"].pop("finished_at")
    assert before <= finished <= time.time()
    assert built == {
        "sweep_id": "sw",
        "host": "vm",
        "config": CONFIG,
        "engine": {
            "name": "llama_cpp",
            "version": SERVER["version"],
            "model": "/m.gguf",
            "launcher": "nohup",
            "model_identity": None,
        },
        "launch": {"argv": ARGV, "env": {"LLAMA_ARG_THREADS": "1"}, "log_path": HANDLE["log"]},
        "host_facts": HOST_FACTS,
        "timings": {"started_at": 1796016243.5, "ready_at": READY["ready_at"], "load_s": 5.07},
        "suite": {"git_rev": "abc123"},
        "benchmark_output": BENCH,
        "failure": None,
        "launch_index": 1,  # the playbook's slot says which launch; none: the first
        "launch_prior": None,  # a plan without one (older): the assumed spread
        "prefetch": None,  # not asked for (-e prefetch=false, a follower)
    }
    fact = record.build_fact(outcome.payload(run(), None, []))
    assert (fact.status, fact.config.id, fact.engine.launcher, fact.timings.load_s) == (
        "ok",
        "s1",
        "nohup",
        5.07,
    )


def test_the_hosts_own_engine_version_wins_over_the_roles_pin() -> None:
    reported = run(preflight={"version": "0.5.23", "host_facts": HOST_FACTS})
    assert outcome.payload(reported, None, [])["engine"]["version"] == "0.5.23"
    # Launch k >= 2 of a config: its fact says which (the file name follows, in specsweep_results).
    assert record.build_fact(outcome.payload({**run(), "launch_index": "3"}, None, [])).launch_index == 3


def test_a_launch_that_failed_becomes_a_failed_fact_with_its_phase_and_log(tmp_path: Path) -> None:
    failed = {"msg": "llama-server exited 1 during start", "cause": "exited"}
    tail = ["error: unknown argument --bogus"]
    built = outcome.payload(run(handle={}, ready={}, benchmark_output=None, preflight=None), failed, tail)
    assert built["failure"] == {"phase": "launch", "result": failed, "log_tail": tail}
    assert (built["engine"]["launcher"], built["launch"]["log_path"]) == ("not launched", None)
    assert built["engine"]["version"] == SERVER["version"]
    assert built["host_facts"] == {"hostname": "vm"}  # no preflight record: the name at least
    assert (built["timings"]["ready_at"], built["timings"]["load_s"]) == (None, None)
    fact = record.build_fact(built)
    assert fact.status == "failed"
    assert fact.failure is not None
    assert (fact.failure.phase, fact.failure.cause, fact.failure.message) == (
        "launch", "exited", "llama-server exited 1 during start",
    )  # fmt: skip
    assert fact.failure.log_tail == tail


def test_a_benchmark_that_failed_is_recorded_in_the_benchmark_phase() -> None:
    failed = {"msg": "non-zero return code", "rc": 1}
    built = outcome.payload(run(benchmark_output=None), failed, [])
    assert built["failure"]["phase"] == "benchmark"
    assert record.build_fact(built).failure.phase == "benchmark"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("after", "stops"),
    [
        ({}, False),  # a good nohup launch of a lone host: left for the next launch to replace
        ({"status": "failed"}, True),
        ({"status": None}, True),  # nothing was recorded
        ({"launcher": "systemd"}, True),
        ({"host": host_plan(follows="gpu-a")}, True),
        ({"host": host_plan(followed_by=["gpu-b"])}, True),
        ({"search": True}, True),
    ],
)
def test_only_a_good_nohup_launch_of_a_lone_host_keeps_its_server(after: dict[str, Any], stops: bool) -> None:
    good = {"status": "ok", "launcher": "nohup", "host": host_plan(), "search": False}
    assert outcome.stop_now({**good, **after}) is stops


def test_a_server_or_host_plan_read_back_with_a_field_wrong_is_refused_by_name() -> None:
    misspelt = {**SERVER, "modle": SERVER["model"]}
    del misspelt["model"]
    with pytest.raises(PlanError, match="not a valid Server: Object contains unknown field `modle`"):
        outcome.payload(run(server=misspelt), None, [])
    with pytest.raises(PlanError, match=r"Expected `array`, got `str` - at `\$.followed_by`"):
        outcome.stop_now({"status": "ok", "launcher": "nohup", "host": host_plan() | {"followed_by": "b"},
                          "search": False})  # fmt: skip


def test_the_stop_rule_reads_the_host_plan_as_the_playbook_hands_it_over(tmp_path: Path) -> None:
    # Templated vars arrive as Ansible's lazy containers, whose items are rendered only when read.
    after = {"status": "ok", "launcher": "nohup", "host": "{{ specsweep_host }}", "search": False}
    proc = run_local_play(tmp_path, [
        {"ansible.builtin.set_fact": {"specsweep_plan": {"hosts": {"h": host_plan(followed_by=["b"])}}}},
        {"ansible.builtin.assert": {"that": ["specsweep_after | specsweep_stop_now"]},
         "vars": {"specsweep_host": "{{ specsweep_plan.hosts['h'] }}", "specsweep_after": after}},
    ])  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
