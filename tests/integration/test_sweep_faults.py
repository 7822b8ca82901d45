"""Bad input and faults during a sweep, over real SSH against a real llama.cpp server."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sweeps import REPO, playbook_argv, sweep_env
from testhosts import NetnsHosts

# Fast settings for fault tests: one short repeat is enough to prove a config works.
QUICK = ("-e", "repeats=1", "-e", "max_tokens=8", "-e", "warmup=0")


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
    run = run_sweep(
        sweep_inventory, "-e", "steps=1", *QUICK,
        *extra_vars(tmp_path, {"llama_server_model_path": "/opt/absent.gguf",
                               "llama_server_assemble_model": False}),
    )  # fmt: skip
    assert run.proc.returncode != 0
    for host in ("sshost1", "sshost2"):
        problem = f"model_not_found: model path /opt/absent.gguf does not exist on {host}"
        assert f"[{host}] FAILED: {problem}" in run.output, run.output[-3000:]
    assert run.facts() == {}  # nothing was measured, so nothing was launched
    assert "launching" not in run.output
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
    # Stands in for a server stuck loading: alive, never listening.
    stuck = ["/usr/bin/env", "python3", "-c", "import time; time.sleep(600)"]
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
    ps = ssh_hosts.run_in_host("sshost1", ["ps", "-eo", "args"]).stdout
    assert "time.sleep(600)" not in ps, ps


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
        assert run.proc.returncode != 0
        fact = run.facts()[("sshost2", "s1")]
        assert (fact.failure.phase, fact.failure.cause) == ("launch", "port_in_use"), fact.failure
        assert "already in use by a process this suite did not start" in fact.failure.message
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
    common = ("-e", "steps=1,2", "-e", "target=sshost1", *QUICK)
    first_fact = tmp_path / "R" / "sshost1" / "baseline.json"
    with open(tmp_path / "killed.log", "wb") as log:
        argv = playbook_argv(sweep_inventory, tmp_path, *common, "-e", "sweep_id=R")
        killed = subprocess.Popen(argv, cwd=REPO, env=sweep_env(), stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + 600
        while not first_fact.exists() and killed.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)  # polling for the file, bounded by the deadline
        assert first_fact.exists(), (tmp_path / "killed.log").read_text()[-3000:]
        os.killpg(killed.pid, signal.SIGKILL)  # the controller dies: no handler, no cleanup
        killed.wait()
    before = first_fact.read_bytes()

    argv = playbook_argv(sweep_inventory, tmp_path, *common, "-e", "resume=R")
    resumed = subprocess.run(argv, cwd=REPO, env=sweep_env(),
                             capture_output=True, text=True, timeout=900)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout[-4000:]
    assert "baseline: measured already, skipped" in resumed.stdout
    assert first_fact.read_bytes() == before  # not measured twice
    facts = sorted(p.name for p in (tmp_path / "R" / "sshost1").glob("*.json"))
    assert facts == ["baseline.json", "s1.json", "s2.json"]
    assert all(json.loads((tmp_path / "R" / "sshost1" / f).read_text())["status"] == "ok" for f in facts)
    ps = ssh_hosts.run_in_host("sshost1", ["ps", "-eo", "args"]).stdout
    assert "specsweep_llama_server" not in ps, ps  # the killed run's server was stopped too
