"""Bad input and faults during a sweep, over real SSH against a real llama.cpp server."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sweeps import QUICK, REPO, playbook_argv, start_sweep, sweep_env, wait_for
from testhosts import NetnsHosts

from analysis.facts.schema import load_fact


def extra_vars(tmp_path: Path, values: dict) -> tuple[str, str]:
    """Pass structured or awkward values as a JSON file: exactly what a user's -e @file does."""
    path = tmp_path / "vars.json"
    path.write_text(json.dumps(values))
    return ("-e", f"@{path}")


@pytest.mark.parametrize(
    ("args", "variable"),
    [
        (("-e", "steps=abc"), "steps"),
        (("-e", "steps=0"), "steps"),
        (("-e", "steps=-1"), "steps"),
        (("-e", "steps=1.5"), "steps"),
        # The shell word is a stray word to Ansible's key=value parser: refused, never run.
        (("-e", "steps=1; touch /tmp/specsweep-pwned"), "-e"),
        (("-e", "steps=", "-e", "topk=2"), "topk"),
        (("-e", "steps=1", "-e", "algorithm=WARP"), "algorithm"),
        (("-e", "steps=2", "-e", "topk=2", "-e", "draft_tokens=9"), "draft_tokens"),
        (("-e", "steps=1", "-e", "repeats=x"), "repeats"),
        (("-e", "steps=1", "-e", "sweep_id=../x"), "sweep_id"),
        (("-e", "steps=1", "-e", "env_profiles=nccl_fast"), "env_profiles"),
        (("-e", "stepz=2"), "stepz"),  # a typo must not sweep the default grid on the fleet
        (("-e", "sweep_id=a b"), "-e"),  # a stray word in key=value form
        (("-e", "steps=1..100"), "max_configs"),  # days of GPU time
    ],
)
def test_bad_input_fails_with_one_line_naming_the_variable_before_any_host_is_touched(
    sglang_inventory: Path, run_sweep, args: tuple[str, ...], variable: str
) -> None:
    run = run_sweep(sglang_inventory, *args)
    assert run.proc.returncode != 0
    assert f"Invalid sweep request: {variable}:" in run.output, run.output[-2000:]
    assert "stepz" not in args or "(did you mean steps?)" in run.output, run.output[-2000:]
    assert "max_configs" not in variable or "-e max_configs=101" in run.output, run.output[-2000:]
    # No host was touched: the plan wrote nothing, and no host's preflight ran.
    assert not run.sweep_dir.exists() and not list(run.sweep_dir.parent.glob("*/*.preflight.json"))
    assert not os.path.exists("/tmp/specsweep-pwned")


def test_missing_model_stops_that_host_before_it_launches_anything(
    sweep_inventory: Path, run_sweep, ssh_hosts: NetnsHosts, tmp_path: Path
) -> None:
    # The demo model is assembled only at its default path (llama_server_assemble_model is true).
    run = run_sweep(
        sweep_inventory, "-e", "steps=1", *QUICK,
        *extra_vars(tmp_path, {"llama_server_model_path": "/opt/absent.gguf"}),
    )  # fmt: skip
    assert run.proc.returncode != 0
    for host in ("sshost1", "sshost2"):
        problem = f"model_not_found: model path /opt/absent.gguf does not exist on {host}"
        assert f"[{host}] FAILED: {problem}" in run.output, run.output[-3000:]
    assert run.facts() == {}  # nothing was measured, so nothing was launched
    assert "launching" not in run.output
    assert not [h for h in ("sshost1", "sshost2") if (ssh_hosts.opt_dir(h) / "absent.gguf").exists()]
    preflight = json.loads((run.sweep_dir / "sshost1.preflight.json").read_text())
    assert preflight["problems"] == ["model_not_found: model path /opt/absent.gguf does not exist on sshost1"]
    assert not [
        h for h in ("sshost1", "sshost2") if (ssh_hosts.opt_dir(h) / "specsweep/run/sweep.lock").exists()
    ]


def model_copy(ssh_hosts: NetnsHosts, host: str, name: str) -> Path:
    """A copy of the installed model under the host's /opt, to break."""
    real = ssh_hosts.opt_dir(host) / "specsweep/models/gemma-3-270m-q4_k_m.gguf"
    copy = ssh_hosts.opt_dir(host) / name
    shutil.copyfile(real, copy)
    return copy


def test_crash_during_load_is_recorded_and_sweep_continues(
    sweep_inventory: Path, run_sweep, ssh_hosts: NetnsHosts, tmp_path: Path
) -> None:
    # A whole GGUF file whose header names an architecture llama.cpp does not know: it passes the
    # preflight's check, the server starts, then dies while loading it.
    model = model_copy(ssh_hosts, "sshost1", "badarch.gguf")
    with model.open("r+b") as fh:
        head = fh.read(1 << 16)
        fh.seek(head.index(b"gemma3", head.index(b"general.architecture")))
        fh.write(b"gemmaX")
    run = run_sweep(
        sweep_inventory, "-e", "steps=1", "-e", "target=sshost1", *QUICK,
        *extra_vars(tmp_path, {"llama_server_model_path": "/opt/badarch.gguf",
                               "llama_server_assemble_model": False}),
    )  # fmt: skip
    assert run.proc.returncode != 0
    facts = run.facts()
    assert sorted(facts) == [("sshost1", "baseline"), ("sshost1", "s1")], run.output[-3000:]
    for fact in facts.values():
        assert fact.status == "failed"
        assert (fact.failure.phase, fact.failure.cause) == ("load", "model_unsupported"), fact.failure
        assert any("unknown model architecture: 'gemmaX'" in line for line in fact.failure.log_tail)
        # Noticed within seconds of the death, not after the health timeout.
        assert fact.timings.finished_at - fact.timings.started_at < 20
    assert "2 config(s) failed" in run.output
    assert "[sshost1] s1: failed in load: model_unsupported" in run.output, run.output[-3000:]
    assert not (ssh_hosts.opt_dir("sshost1") / "specsweep/run/server-8080.pid").exists()


def test_a_truncated_model_is_named_corrupt_before_anything_launches(
    sweep_inventory: Path, run_sweep, ssh_hosts: NetnsHosts, tmp_path: Path
) -> None:
    model = model_copy(ssh_hosts, "sshost1", "truncated.gguf")
    with model.open("r+b") as fh:
        fh.truncate(1_000_000)  # 253 MB -> 1 MB, as a copy cut short would be
    run = run_sweep(
        sweep_inventory, "-e", "steps=1", "-e", "target=sshost1", *QUICK,
        *extra_vars(tmp_path, {"llama_server_model_path": "/opt/truncated.gguf",
                               "llama_server_assemble_model": False}),
    )  # fmt: skip
    assert run.proc.returncode != 0
    # The cause's word, as a failed config's fact would name it, in the output and preflight.json.
    problem = (
        "model_corrupt: model file /opt/truncated.gguf on sshost1 is truncated: it is 1.0 MB (1000000 bytes)"
    )
    assert f"[sshost1] FAILED: {problem}" in run.output, run.output[-3000:]
    preflight = json.loads((run.sweep_dir / "sshost1.preflight.json").read_text())
    assert any(p.startswith(problem) for p in preflight["problems"]), preflight
    assert run.facts() == {}  # stopped before any launch
    assert not (ssh_hosts.opt_dir("sshost1") / "specsweep/run/sweep.lock").exists()


def test_server_that_never_gets_healthy_times_out_shows_progress_and_is_stopped(
    sweep_inventory: Path, run_sweep, ssh_hosts: NetnsHosts, tmp_path: Path
) -> None:
    # Stands in for a server stuck loading: alive, never listening (its --version, in preflight, answers).
    stuck = ["/usr/bin/env", "python3", "-c", "import sys, time; '--version' in sys.argv or time.sleep(600)"]
    run = run_sweep(
        sweep_inventory, "-e", "steps=1", "-e", "baseline=false", "-e", "target=sshost1", *QUICK,
        *extra_vars(tmp_path, {"llama_server_command": stuck, "llama_server_health_timeout_s": 10,
                               "wait_for_health_progress_interval_s": 1}),
    )  # fmt: skip
    assert run.proc.returncode != 0
    fact = run.facts()[("sshost1", "s1")]
    assert (fact.status, fact.failure.cause) == ("failed", "timeout"), fact.failure
    assert "[sshost1] still loading (starting)" in run.output, run.output[-5000:]
    assert not (ssh_hosts.opt_dir("sshost1") / "specsweep/run/server-8080.pid").exists()
    ps = ssh_hosts.run_in_host("sshost1", ["ps", "-ww", "-eo", "args"]).stdout
    assert "time.sleep(600)" not in ps, ps


# Healthy, but every generation answers 500, with a request id that differs each time (an engine
# stand-in, allowed for this fault only).
ANSWERS_500 = r"""
import http.server, sys, uuid
if "--version" in sys.argv:
    sys.exit(0)
port = int(sys.argv[sys.argv.index("--port") + 1])
ERROR = '"message": "CUDA error: an illegal memory access was encountered"'
BODY = '{"error": {"code": 500, %s}, "id": "%%s"}' % ERROR

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.answer(200, b'{"status": "ok"}')
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.answer(500, (BODY % uuid.uuid4()).encode())
    def answer(self, status, body):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

print("listening", flush=True)
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


def test_a_server_whose_generation_answers_500_with_a_changing_body_fails_in_seconds_quoting_it(
    sweep_inventory: Path, run_sweep, ssh_hosts: NetnsHosts, tmp_path: Path
) -> None:
    (ssh_hosts.opt_dir("sshost1") / "answers500.py").write_text(ANSWERS_500)
    run = run_sweep(
        sweep_inventory, "-e", "steps=1", "-e", "baseline=false", "-e", "target=sshost1", *QUICK,
        *extra_vars(tmp_path, {"llama_server_command": ["/usr/bin/env", "python3", "/opt/answers500.py"],
                               "llama_server_health_timeout_s": 600}),
    )  # fmt: skip
    assert run.proc.returncode == 2, run.output[-3000:]
    fact = run.facts()[("sshost1", "s1")]
    assert (fact.failure.phase, fact.failure.cause) == ("load", "generation_error"), fact.failure
    assert "CUDA error: an illegal memory access was encountered" in fact.failure.message
    # Within seconds of the first answer (the module's own measure), not the 600 s health timeout (before,
    # a body that differed each time was waited out); the launch to record bound is loose: the machine
    # is shared.
    repeated = r"answered 500 \d+ times in 3\.\d s, the body differing \(the last\): .*\"id\": \"[\w-]{36}\""
    assert re.search(repeated, fact.failure.message), fact.failure
    assert fact.timings.finished_at - fact.timings.started_at < 90, fact.timings
    assert "[sshost1] s1: failed in load: generation_error" in run.output, run.output[-3000:]
    assert "answers500.py" not in ssh_hosts.run_in_host("sshost1", ["ps", "-ww", "-eo", "args"]).stdout


def test_foreign_process_on_the_port_is_reported_and_left_alone(
    sweep_inventory: Path, run_sweep, ssh_hosts: NetnsHosts
) -> None:
    foreign = ssh_hosts.spawn_in_host(
        "sshost2", [sys.executable, "-m", "http.server", "8080", "--bind", "127.0.0.1"]
    )
    try:
        probe = ["python3", "-c", "import socket; socket.create_connection(('127.0.0.1', 8080), 1)"]
        for _ in range(100):  # bounded: until the foreign server listens
            if ssh_hosts.run_in_host("sshost2", probe).returncode == 0:
                break
        run = run_sweep(
            sweep_inventory, "-e", "steps=1", "-e", "baseline=false", "-e", "target=sshost2", *QUICK
        )
        # Refused at preflight, naming the holder: nothing launched, so no config failed for it.
        assert run.proc.returncode == 2, run.output[-3000:]
        # The foreign server shares the host's network, not its pid namespace: its pid is not seen there.
        said = "sshost2: port 8080 is held by a process not visible here (another user's, or in another pid "
        assert said in run.output and "a process no specsweep run recorded here" in run.output, run.output[
            -3000:
        ]
        assert "launching" not in run.output and run.facts() == {}, run.output[-3000:]
        assert foreign.poll() is None, "the foreign process must survive"
        assert ssh_hosts.run_in_host("sshost2", probe).returncode == 0
    finally:
        foreign.kill()
        foreign.wait()


def test_model_path_with_shell_metacharacters_is_passed_verbatim(
    sweep_inventory: Path, run_sweep, ssh_hosts: NetnsHosts, tmp_path: Path
) -> None:
    opt = ssh_hosts.opt_dir("sshost1")
    real = opt / "specsweep/models/gemma-3-270m-q4_k_m.gguf"
    # Any shell on the way would split, unquote or substitute this (a path may not hold "/").
    odd_dir = "m o'd\"$(echo pwned);`id`*"
    (opt / odd_dir).mkdir(exist_ok=True)
    odd = opt / odd_dir / "model.gguf"
    if not odd.exists():
        os.link(real, odd)
    host_path = f"/opt/{odd_dir}/model.gguf"
    run = run_sweep(
        sweep_inventory, "-e", "steps=1", "-e", "baseline=false", "-e", "target=sshost1", *QUICK,
        *extra_vars(tmp_path, {"llama_server_model_path": host_path, "llama_server_assemble_model": False}),
    )  # fmt: skip
    assert run.proc.returncode == 0, run.output[-3000:]
    fact = run.facts()[("sshost1", "s1")]
    assert fact.status == "ok"
    assert fact.launch.argv[fact.launch.argv.index("-m") + 1] == host_path
    shutil.rmtree(opt / odd_dir)


def test_check_mode_changes_nothing_and_launches_nothing(
    sweep_inventory: Path, run_sweep, ssh_hosts: NetnsHosts
) -> None:
    run = run_sweep(sweep_inventory, "--check", "-e", "steps=1", "-e", "target=sshost2", *QUICK)
    assert run.proc.returncode == 0, run.output[-3000:]
    assert not run.sweep_dir.exists()
    assert "server-8080" not in ssh_hosts.run_in_host("sshost2", ["ls", "/opt/specsweep/run"]).stdout


def test_controller_killed_mid_sweep_then_resumed_loses_and_repeats_nothing(
    sweep_inventory: Path, ssh_hosts: NetnsHosts, tmp_path: Path
) -> None:
    # One workload, the cheapest, so that the sweep has a traffic and a mix for the resume to keep.
    asked = ("-e", "steps=1", *QUICK, "-e", "workloads=code", "-e", "workload_records=1",
              "-e", "mix=code=1")  # fmt: skip
    first_fact = tmp_path / "R" / "sshost1" / "baseline.json"
    with open(tmp_path / "killed.log", "wb") as log:
        argv = playbook_argv(sweep_inventory, tmp_path, *asked, "-e", "target=sshost1", "-e", "sweep_id=R")
        killed = subprocess.Popen(argv, cwd=REPO, env=sweep_env(), stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + 600
        while not first_fact.exists() and killed.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)  # polling for the file, bounded by the deadline
        assert first_fact.exists(), (tmp_path / "killed.log").read_text()[-3000:]
        os.killpg(killed.pid, signal.SIGKILL)  # the controller dies: no handler, no cleanup
        killed.wait()
    before = first_fact.read_bytes()

    # The resume names only the sweep (and the hosts its play targets): it measures as the sweep did.
    argv = playbook_argv(sweep_inventory, tmp_path, "-e", "target=sshost1", "-e", "resume=R")
    resumed = subprocess.run(argv, cwd=REPO, env=sweep_env(),
                             capture_output=True, text=True, timeout=900)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout[-4000:]
    assert "baseline: measured already, skipped" in resumed.stdout
    assert first_fact.read_bytes() == before  # not measured twice
    facts = sorted(p.name for p in (tmp_path / "R" / "sshost1").glob("*.json"))
    assert facts == ["baseline.json", "s1.json"]
    docs = [json.loads((tmp_path / "R" / "sshost1" / f).read_text()) for f in facts]
    assert all(d["status"] == "ok" for d in docs)
    assert [sorted({r["workload"] for r in d["runs"]}) for d in docs] == [["code"]] * 2
    assert [(d["benchmark"]["repeats"], d["benchmark"]["max_tokens"]) for d in docs] == [(1, 8)] * 2
    # Before, the mix not given again was recorded as none, and recommend weighed equal shares.
    settings = json.loads((tmp_path / "R" / "sweep.json").read_text())["settings"]
    assert (settings["mix"], settings["workloads"], settings["steps"]) == ({"code": 1.0}, ["code"], [1])
    ps = ssh_hosts.run_in_host("sshost1", ["ps", "-ww", "-eo", "args"]).stdout
    assert "specsweep_llama_server" not in ps, ps  # the killed run's server was stopped too


def test_bad_variables_in_the_inventory_are_refused_at_plan_time_naming_their_source(
    ssh_hosts: NetnsHosts, run_sweep, tmp_path: Path
) -> None:
    # Each bad kind once, from a host var and a group var; before, the first three ran with defaults.
    hostvars = {"sshost1": {"steps": "two", "llama_server_port": "eighty"}, "sshost2": {"lease_s": -5}}
    group_vars = {"benchmark_concurrency": 0, "benchmark_request_timeout_s": 0}
    inventory = ssh_hosts.write_inventory(tmp_path / "hosts.yml", hostvars=hostvars, group_vars=group_vars)
    run = run_sweep(inventory, "-e", "steps=1", *QUICK)
    assert run.proc.returncode != 0
    for sentence in (
        "steps: 'two' from host vars of sshost1 is a sweep setting, read from -e only",
        "lease_s: -5 from host vars of sshost2 is a sweep setting, read from -e only",
        "llama_server_port: 'eighty' from host vars of sshost1: expected a whole number",
        "benchmark_concurrency: 0 from group vars of sweep is set by the sweep itself: use -e concurrency=",
        "benchmark_request_timeout_s: 0 from group vars of sweep: must be at least 1",
    ):
        assert sentence in run.output, run.output[-3000:]
    # Refused before any host was touched: nothing written, no host's preflight ran.
    assert not run.sweep_dir.exists()
    assert "preflight" not in run.output.lower() and "launching" not in run.output


def test_a_sweep_id_in_use_is_refused_before_anything_is_written_and_plans_are_never_mixed(
    sweep_inventory: Path, ssh_hosts: NetnsHosts, tmp_path: Path
) -> None:
    sweep = tmp_path / "X"

    def second(*extra: str) -> subprocess.CompletedProcess[str]:
        argv = playbook_argv(
            sweep_inventory, tmp_path, "-e", "steps=1", "-e", "baseline=false", *QUICK, *extra
        )
        return subprocess.run(argv, cwd=REPO, env=sweep_env(), capture_output=True, text=True, timeout=600)

    with open(tmp_path / "first.log", "wb") as log:
        argv = playbook_argv(sweep_inventory, tmp_path, "-e", "steps=1", "-e", "baseline=false", *QUICK,
                             "-e", "target=sshost1", "-e", "sweep_id=X")  # fmt: skip
        first = subprocess.Popen(argv, cwd=REPO, env=sweep_env(), stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 300
            while not (sweep / "plan.json").exists() and first.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)  # polling for the file, bounded by the deadline
            written = {name: (sweep / name).read_bytes() for name in ("sweep.json", "plan.json")}
            # The same id on another host, and a resume, while X runs: refused, X's files untouched.
            for extra in (("-e", "sweep_id=X", "-e", "target=sshost2"), ("-e", "resume=X")):
                refused = second(*extra)
                assert refused.returncode != 0, refused.stdout[-3000:]
                assert "sweep X is running: run " in refused.stdout + refused.stderr, refused.stdout[-3000:]
                assert {name: (sweep / name).read_bytes() for name in written} == written
            assert first.wait(timeout=600) == 0, (tmp_path / "first.log").read_text()[-3000:]
        finally:
            if first.poll() is None:  # as Ctrl-C: its server stopped, sshost1 given back for the next test
                first.terminate()
                first.wait(timeout=180)
    assert not (sweep / "sshost2").exists()
    # X has ended: its id again with other benchmark settings would mix two plans in one table.
    mixed = second("-e", "sweep_id=X", "-e", "target=sshost1", "-e", "max_tokens=16")
    assert mixed.returncode != 0
    assert "sshost1/s1 was measured with max_tokens 8 (now 16)" in mixed.stdout + mixed.stderr, mixed.stdout
    assert (sweep / "plan.json").read_bytes() == written["plan.json"]


def test_a_full_results_disk_is_refused_at_plan_time_and_a_fact_it_cannot_take_is_kept_until_resume(
    sweep_inventory: Path, ssh_hosts: NetnsHosts, tmp_path: Path
) -> None:
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(tiny)], check=True)
    kept = ssh_hosts.opt_dir("sshost1") / "specsweep" / "run" / "F.s1.fact.json"
    try:
        args = ("-e", "steps=1", "-e", "baseline=false", "-e", "target=sshost1", *QUICK)
        refused = subprocess.run(playbook_argv(sweep_inventory, tiny, *args, "-e", "sweep_id=F"), cwd=REPO,
                                 env=sweep_env(), capture_output=True, text=True, timeout=600)  # fmt: skip
        assert refused.returncode != 0
        said = refused.stdout + refused.stderr
        assert f"results_dir: {tiny} has 8.0 MiB free, and this sweep's 1 fact(s) need about 17 MiB" in said
        assert list(tiny.iterdir()) == []
        # Room at plan time, then the disk fills up after preflight, before the fact is written.
        subprocess.run(["mount", "-o", "remount,size=24m", str(tiny)], check=True)
        with open(tmp_path / "full.log", "wb") as log:
            proc = subprocess.Popen(playbook_argv(sweep_inventory, tiny, *args, "-e", "sweep_id=F"), cwd=REPO,
                                    env=sweep_env(), stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
            deadline = time.monotonic() + 300
            while not (tiny / "F" / "sshost1.preflight.json").exists() and proc.poll() is None:
                assert time.monotonic() < deadline
                time.sleep(0.1)  # polling for the file, bounded by the deadline
            filler = tiny / "filler"
            with open(filler, "wb") as fh, contextlib.suppress(OSError):
                while True:
                    fh.write(b"\0" * (1 << 20))
            assert proc.wait(timeout=600) == 2
        out = (tmp_path / "full.log").read_text()
        assert f"sshost1/s1: fact not written to {tiny}/F/sshost1/s1.json: No space left on device" in out, (
            out[-3000:]
        )
        # The run's end names what is kept where, and the host has it.
        assert (
            "sshost1: 1 fact(s) kept on the host, not written to the results dir: s1 at "
            "/opt/specsweep/run/F.s1.fact.json; free space, then -e resume=F records them" in out
        ), out[-3000:]
        assert "not measured: s1" not in out, out[-3000:]
        measured = json.loads(kept.read_text())
        assert (measured["status"], measured["config"]["id"], measured["sweep_id"]) == ("ok", "s1", "F")
        assert not list(tiny.rglob("*.tmp")) and not (tiny / "F" / "sshost1" / "s1.json").exists()

        # Space freed: the resume records the kept fact first and launches nothing for it.
        filler.unlink()
        resumed = subprocess.run(playbook_argv(sweep_inventory, tiny, *args, "-e", "resume=F"), cwd=REPO,
                                 env=sweep_env(), capture_output=True, text=True, timeout=600)  # fmt: skip
        out = resumed.stdout + resumed.stderr
        assert resumed.returncode == 0, out[-3000:]
        assert "recorded the facts an earlier run kept on sshost1: s1" in out, out[-3000:]
        assert "s1: measured already, skipped" in out and "launching" not in out, out[-3000:]
        assert json.loads((tiny / "F" / "sshost1" / "s1.json").read_text()) == measured
        assert not kept.exists()
    finally:
        subprocess.run(["umount", "-l", str(tiny)], check=False)
        kept.unlink(missing_ok=True)


# The kernel's line as mm/oom_kill.c formats it; the kernel cannot be made to OOM-kill this server (its
# memory does not grow while it serves, and a cgroup v1 limit below its use is refused, not enforced),
# so the test writes the line to the kernel's log, marked as the test's, then kills the server as the
# OOM killer does (tests/unit/test_kernel_log.py finds a real OOM kill's line).
OOM_LINE = (
    "specsweep test: Out of memory: Killed process {pid} (python3) total-vm:9120340kB, anon-rss:7340032kB, "
    "file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:15020kB oom_score_adj:0"
)


@pytest.mark.parametrize("killer", ["kill -9", "oom killer"])
def test_an_engine_killed_mid_benchmark_fails_its_level_in_seconds_and_keeps_the_levels_before(
    sweep_inventory: Path, ssh_hosts: NetnsHosts, tmp_path: Path, killer: str
) -> None:
    # Two levels of 6 s each: the server dies (kill -9, or the OOM killer's SIGKILL) in the second.
    # A sweep id per case: the host's run folder (the progress file waited for) outlives a test.
    sweep_id = "M" if killer == "kill -9" else "MO"
    proc = start_sweep(sweep_inventory, tmp_path, "-e", f"sweep_id={sweep_id}", "-e", "steps=1",
                       "-e", "baseline=false", "-e", "target=sshost1", "-e", "repeats=1", "-e", "warmup=0",
                       "-e", "max_tokens=8", "-e", "concurrency=1,2", "-e", "bench_duration_s=6")  # fmt: skip
    run = ssh_hosts.opt_dir("sshost1") / "specsweep" / "run"
    progress = run / sweep_id / "s1.bench.json.stderr"
    second = lambda: progress.exists() and "at concurrency 2" in progress.read_text()  # noqa: E731 - a condition
    wait_for(second, "the second level", timeout=300, proc=proc)
    server = json.loads((run / "server-8080.pid").read_text())
    oom = OOM_LINE.format(pid=server["server_pid"])
    if killer == "oom killer":
        Path("/dev/kmsg").write_text(oom + "\n")
    assert ssh_hosts.run_in_host("sshost1", ["kill", "-9", str(server["server_pid"])]).returncode == 0
    killed = time.time()
    assert proc.wait(timeout=300) == 2, (tmp_path / "sweep.log").read_text()[-3000:]
    fact = load_fact(json.loads((tmp_path / sweep_id / "sshost1" / "s1.json").read_text()))
    assert fact.status == "failed" and fact.failure is not None, fact
    cause = "oom_killed" if killer == "oom killer" else "server_exited"
    assert (fact.failure.phase, fact.failure.cause, fact.failure.concurrency) == ("benchmark", cause, 2), (
        fact.failure
    )
    said = "server exited (signal 9: SIGKILL) during benchmark, repeat 1/1 at concurrency 2"
    if killer == "oom killer":
        said += f": oom_killed: the kernel: {oom}"
    assert fact.failure.message.startswith(said), fact.failure
    # The first level's run is kept, the second's partial one is not; noticed within seconds.
    assert [(r.concurrency, r.repeat) for r in fact.runs] == [(1, 1)], fact.runs
    assert fact.timings.finished_at - killed < 15, fact.timings
    assert "specsweep_bench.py" not in ssh_hosts.run_in_host("sshost1", ["ps", "-ww", "-eo", "args"]).stdout
