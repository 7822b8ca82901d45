"""deploy.yml end to end over the SSH test hosts (nohup): one tiny sweep, then a gated rollout of its
answer, canary first, on the production port; and a canary that fails its gate and is rolled back."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sweeps import REPO, SweepRun, playbook, sweep_env
from testhosts import NetnsHosts

from analysis.deploy.choice import HostInput, choose

HOSTS = ("sshost1", "sshost2")
PORT = 8190  # not the sweep's 8080: the production port is rewritten into the argv
PIDFILE = "/opt/specsweep/run/deploy/serve.pid"


@dataclass
class Deployed:
    """The tiny sweep, what it recommends per host, and the first (good) deploy of it."""

    sweep: SweepRun
    targets: dict[str, dict]
    proc: subprocess.CompletedProcess[str]


def deploy(inventory: Path, sweep_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """Run `ansible-playbook deploy.yml` from the repo root and wait for it."""
    return subprocess.run(
        deploy_argv(inventory, sweep_dir, *extra),
        cwd=REPO,
        env=sweep_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def deploy_argv(inventory: Path, sweep_dir: Path, *extra: str) -> list[str]:
    """The `ansible-playbook deploy.yml` command line on the test hosts, to the test's port."""
    return [
        str(Path(sys.executable).parent / "ansible-playbook"), "deploy.yml", "-i", str(inventory),
        "-e", f"from={sweep_dir}", "-e", f"deploy_port={PORT}", *extra,
    ]  # fmt: skip


def other_config(deployed: Deployed) -> str:
    """A config the sweep measured ok that the canary does not serve now."""
    return "baseline" if deployed.targets["sshost1"]["config"] != "baseline" else "s1"


def serving(hosts: NetnsHosts, host: str) -> dict:
    """The production server's supervisor record on `host` (argv, pids), and deployed.json."""
    record = json.loads(hosts.run_in_host(host, ["cat", PIDFILE]).stdout)
    state = json.loads(hosts.run_in_host(host, ["cat", "/opt/specsweep/run/deploy/deployed.json"]).stdout)
    return {"record": record, "state": state}


@pytest.fixture(scope="module")
def deployed(
    sweep_inventory: Path, ssh_hosts: NetnsHosts, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployed]:
    """A 2-config sweep on both hosts, then deploy.yml of its answer with a generous gate."""
    results = tmp_path_factory.mktemp("deploy-results")
    sweep = playbook(
        sweep_inventory, results, "deploysweep", "-e", "steps=1", "-e", "repeats=2", "-e", "max_tokens=24",
        "-e", "warmup=0", "-e", "bench_requests=2",
    )  # fmt: skip
    assert sweep.proc.returncode == 0, sweep.output[-4000:]
    targets = choose(sweep.sweep_dir, [HostInput(h, PORT) for h in HOSTS])
    # The gate's figures are checked by the next test; here a busy 2-core machine must not fail it.
    proc = deploy(sweep_inventory, sweep.sweep_dir, "-e", "deploy_gate_tolerance_pct=60")
    yield Deployed(sweep, targets, proc)
    for host in HOSTS:  # stop what the deploys left, by its pidfile
        subprocess.run(
            [str(Path(sys.executable).parent / "ansible"), host, "-i", str(sweep_inventory),
             "-m", "specsweep_server", "-a", f"state=stopped pidfile={PIDFILE} port={PORT}"],
            cwd=REPO, env=sweep_env(), capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip


def test_deploy_gates_the_canary_then_the_rest_each_serving_the_recommended_argv_on_the_production_port(
    deployed: Deployed, ssh_hosts: NetnsHosts
) -> None:
    out = deployed.proc.stdout + deployed.proc.stderr
    assert deployed.proc.returncode == 0, out[-4000:]
    # Canary first: its gates passed before the other host was touched.
    passed = [m.start() for m in re.finditer(r"^\[sshost\d\] gates passed", out, re.M)]
    assert len(passed) == 2, out[-4000:]
    assert out.index("[sshost1] gates passed") < out.index("sshost2: now serving"), out[-4000:]
    for host in HOSTS:
        target = deployed.targets[host]
        now = serving(ssh_hosts, host)
        argv = now["record"]["argv"]
        assert argv == target["argv"], (argv, target["argv"])
        assert argv[argv.index("--port") + 1] == str(PORT)
        assert "exit" not in now["record"], now["record"]  # still running
        assert now["state"]["config"] == target["config"] and now["state"]["sweep_id"] == "deploysweep"
    # Recorded: `deployed` lists what runs where.
    history = deployed.sweep.sweep_dir.parent / "history.sqlite"
    listed = subprocess.run(
        [sys.executable, "-m", "analysis", "deployed", "--history", str(history), "--format", "json"],
        cwd=REPO, capture_output=True, text=True, check=True,
    )  # fmt: skip
    rows = {r["host"]: r for r in json.loads(listed.stdout)}
    assert sorted(rows) == list(HOSTS), listed.stdout
    for host in HOSTS:
        assert rows[host]["config"] == deployed.targets[host]["config"]
        assert rows[host]["argv_sha256"] == deployed.targets[host]["argv_sha256"]
        assert rows[host]["gate_tok_s"] > 0 and rows[host]["gate_errors"] == 0, rows[host]


def test_failed_gate_on_the_canary_rolls_it_back_and_leaves_the_rest_untouched(
    deployed: Deployed, sweep_inventory: Path, ssh_hosts: NetnsHosts
) -> None:
    assert deployed.proc.returncode == 0, deployed.proc.stdout[-3000:]
    before = {h: serving(ssh_hosts, h) for h in HOSTS}
    # The other config than the one serving, and a gate no server can meet: 11x the sweep's tok/s.
    other = other_config(deployed)
    proc = deploy(
        sweep_inventory,
        deployed.sweep.sweep_dir,
        "-e",
        f"config={other}",
        "-e",
        "deploy_gate_tolerance_pct=-1000",
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-4000:]
    assert re.search(
        rf"sshost1: gate tok/s failed: [\d.]+ tok/s, below the sweep's floor [\d.]+ \(median [\d.]+\); "
        rf"rolled back to {before['sshost1']['state']['config']} of sweep deploysweep",
        out,
    ), out[-4000:]
    canary = serving(ssh_hosts, "sshost1")
    assert canary["record"]["argv"] == before["sshost1"]["record"]["argv"]  # the previous argv again
    assert canary["record"]["pid"] != before["sshost1"]["record"]["pid"]  # restarted
    assert canary["state"] == before["sshost1"]["state"]
    rest = serving(ssh_hosts, "sshost2")
    assert rest["record"]["pid"] == before["sshost2"]["record"]["pid"], "the rest must not be touched"
    assert rest["state"] == before["sshost2"]["state"]
    # And the run says so at its end.
    said = "deploy stopped (the canary sshost1 failed): sshost2 not touched, left on their old config"
    assert said in out, out[-4000:]


def test_check_shows_each_hosts_change_and_touches_nothing(
    deployed: Deployed, sweep_inventory: Path, ssh_hosts: NetnsHosts
) -> None:
    assert deployed.proc.returncode == 0, deployed.proc.stdout[-3000:]
    before = {h: serving(ssh_hosts, h) for h in HOSTS}
    other = other_config(deployed)
    proc = deploy(sweep_inventory, deployed.sweep.sweep_dir, "-e", f"config={other}", "--check", "--diff")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    for host in HOSTS:
        assert f"{host}: would serve {other} of sweep deploysweep on port {PORT}" in out, out[-4000:]
    assert re.search(rf'^-\s+"config": "{before["sshost1"]["state"]["config"]}",$', out, re.M), out[-4000:]
    assert re.search(rf'^\+\s+"config": "{other}",$', out, re.M), out[-4000:]
    assert {h: serving(ssh_hosts, h) for h in HOSTS} == before  # same pids, same state


def test_ctrl_c_mid_rollout_leaves_every_host_serving_and_says_old_or_new(
    deployed: Deployed, sweep_inventory: Path, ssh_hosts: NetnsHosts, tmp_path: Path
) -> None:
    assert deployed.proc.returncode == 0, deployed.proc.stdout[-3000:]
    before = {h: serving(ssh_hosts, h) for h in HOSTS}
    other = other_config(deployed)
    new_argv = choose(deployed.sweep.sweep_dir, [HostInput("sshost1", PORT)], config=other)["sshost1"]["argv"]
    log = open(tmp_path / "deploy.log", "wb")  # noqa: SIM115 - the child writes it
    argv = deploy_argv(sweep_inventory, deployed.sweep.sweep_dir, "-e", f"config={other}")
    proc = subprocess.Popen(argv, cwd=REPO, env=sweep_env(), stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip
    pidfile = ssh_hosts.opt_dir("sshost1") / "specsweep" / "run" / "deploy" / "serve.pid"

    def canary_restarted() -> bool:
        try:
            return json.loads(pidfile.read_text()).get("argv") == new_argv
        except (OSError, ValueError):
            return False

    deadline = time.monotonic() + 300
    while not canary_restarted():  # polling a condition, bounded by the deadline
        assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "deploy.log").read_text()[
            -3000:
        ]
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGINT)  # the new server is loading or being gated: mid-change
    proc.wait(timeout=600)
    out = (tmp_path / "deploy.log").read_text()
    assert proc.returncode != 0, out[-3000:]
    assert "interrupted: every host of the deploy back to what last passed its gates there" in out, out[
        -3000:
    ]
    for host in HOSTS:
        said = re.search(rf"{host}: (old|new): (\S+) of sweep deploysweep", out)
        assert said, out[-3000:]
        now = serving(ssh_hosts, host)
        assert "exit" not in now["record"], now["record"]  # serving
        assert now["state"]["config"] == said.group(2) and now["record"]["argv"] == now["state"]["argv"]
        # Interrupted before the canary's gates could pass: every host on what it served before.
        assert said.groups() == ("old", before[host]["state"]["config"]), out[-3000:]
    # The rest was never touched: the canary had not passed when the rollout stopped.
    assert serving(ssh_hosts, "sshost2")["record"]["pid"] == before["sshost2"]["record"]["pid"]


def hook(path: Path, phase: str) -> Path:
    """An operator's drain/undrain task file that logs, on the host, its phase, the pid serving then
    and the controller's clock (one clock for every host, so the lines order across hosts)."""
    line = phase + " {{ (test_hook_pid.content | b64decode | from_json).pid }} {{ now().timestamp() }}"
    path.write_text(json.dumps([
        {"name": f"Test {phase} | Read the serving pid", "register": "test_hook_pid",
         "ansible.builtin.slurp": {"src": PIDFILE}},
        {"name": f"Test {phase} | Log it", "ansible.builtin.lineinfile": {
            "path": "/opt/specsweep/hooks.log", "create": True, "mode": "0644",
            "line": line}},
    ]))  # fmt: skip
    return path


def test_drain_and_undrain_hooks_run_around_each_restarted_hosts_restart_in_order(
    deployed: Deployed, sweep_inventory: Path, ssh_hosts: NetnsHosts, tmp_path: Path
) -> None:
    assert deployed.proc.returncode == 0, deployed.proc.stdout[-3000:]
    before = {h: serving(ssh_hosts, h) for h in HOSTS}
    logs = {h: ssh_hosts.opt_dir(h) / "specsweep" / "hooks.log" for h in HOSTS}
    for log in logs.values():
        log.unlink(missing_ok=True)
    other = other_config(deployed)
    drain, undrain = hook(tmp_path / "drain.yml", "drain"), hook(tmp_path / "undrain.yml", "undrain")
    proc = deploy(
        sweep_inventory, deployed.sweep.sweep_dir, "-e", f"config={other}",
        "-e", "deploy_gate_tolerance_pct=60", "-e", f"deploy_drain_tasks={drain}",
        "-e", f"deploy_undrain_tasks={undrain}",
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    after = {h: serving(ssh_hosts, h) for h in HOSTS}
    lines = []  # (time, host, phase, pid), all hosts
    for host in HOSTS:
        for line in logs[host].read_text().splitlines() if logs[host].exists() else []:
            phase, pid, at = line.split()
            lines.append((float(at), host, phase, int(pid)))
    lines.sort()
    expected = []
    for host in HOSTS:  # canary first; a host already serving `other` is neither drained nor restarted
        if deployed.targets[host]["config"] != other:
            old, new = before[host]["record"]["pid"], after[host]["record"]["pid"]
            assert old != new, (host, before[host]["record"], after[host]["record"])
            expected += [(host, "drain", old), (host, "undrain", new)]
    assert expected, "the test needs one host whose config changes"
    assert [(h, p, pid) for _, h, p, pid in lines] == expected, (lines, out[-3000:])
    # Back to the recommended configs, which the other tests start from.
    back = deploy(sweep_inventory, deployed.sweep.sweep_dir, "-e", "deploy_gate_tolerance_pct=60")
    assert back.returncode == 0, (back.stdout + back.stderr)[-4000:]
