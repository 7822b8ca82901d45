"""Ansible's own controls on a sweep, as an operator uses them: --limit, --tags, -i anywhere, -e typos."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from sweeps import QUICK, REPO, playbook
from testhosts import NetnsHosts

FACTS = REPO / "tests" / "unit" / "fixtures" / "facts" / "t2probe"


def lock_files(hosts: NetnsHosts) -> list[str]:
    """The sweep locks present on the test hosts."""
    return [h for h in hosts.names if (hosts.opt_dir(h) / "specsweep" / "run" / "sweep.lock").exists()]


def test_limit_sweeps_exactly_the_limited_host_and_says_nothing_of_the_others(
    sweep_inventory: Path, run_sweep, ssh_hosts: NetnsHosts
) -> None:
    run = run_sweep(sweep_inventory, "--limit", "sshost1", "-e", "steps=1", *QUICK)
    assert run.proc.returncode == 0, run.output[-4000:]
    assert sorted(run.facts()) == [("sshost1", "baseline"), ("sshost1", "s1")]
    assert "sshost2" not in run.output, run.output[-3000:]  # not "not reached": not asked for
    plan = json.loads((run.sweep_dir / "plan.json").read_text())
    assert list(plan["hosts"]) == ["sshost1"]
    assert lock_files(ssh_hosts) == []
    # The default output: a line per step of the sweep, the table, the recap; no task banners.
    above_table = run.proc.stdout.split("sweep " + run.sweep_dir.name + " | host", 1)[0]
    assert "TASK [" not in run.proc.stdout and len(above_table.splitlines()) <= 20, above_table


def test_tags_run_the_phases_asked_for_and_never_leave_a_lock(
    sweep_inventory: Path, run_sweep, ssh_hosts: NetnsHosts, tmp_path: Path
) -> None:
    preflight = run_sweep(sweep_inventory, "--tags", "preflight", "-e", "steps=1", sweep_id="pre")
    assert preflight.proc.returncode == 0, preflight.output[-4000:]
    assert (preflight.sweep_dir / "plan.json").is_file()
    assert sorted(p.name for p in preflight.sweep_dir.glob("*.preflight.json")) == [
        "sshost1.preflight.json", "sshost2.preflight.json"
    ]  # fmt: skip
    assert preflight.facts() == {}  # nothing measured
    assert lock_files(ssh_hosts) == []  # taken for the preflight, given back

    # --tags report reports an existing sweep and touches no host.
    shutil.copytree(FACTS, tmp_path / "t2probe")
    report = run_sweep(sweep_inventory, "--tags", "report", sweep_id="t2probe")
    assert report.proc.returncode == 0, report.output[-4000:]
    assert re.search(r"^sweep t2probe \| host localhost \| llama_cpp", report.output, re.M), report.output[
        -3000:
    ]
    assert not list((tmp_path / "t2probe").glob("*.preflight.json"))
    assert lock_files(ssh_hosts) == []

    # A tag that is not a phase is refused before any host is touched.
    other = run_sweep(sweep_inventory, "--tags", "benchmark", sweep_id="other")
    assert other.proc.returncode != 0
    assert "--tags/--skip-tags benchmark: not a phase of the sweep" in other.output, other.output[-3000:]
    assert not other.sweep_dir.exists()


def test_an_inventory_elsewhere_gets_the_repo_group_vars_below_its_own(
    ssh_hosts: NetnsHosts, tmp_path: Path
) -> None:
    fleet = tmp_path / "srv" / "fleet"
    (fleet / "group_vars").mkdir(parents=True)
    # Hosts in the repo's `cpu` group, which group_vars/cpu.yml configures; no engine settings here.
    inventory = ssh_hosts.write_inventory(fleet / "hosts.yml", group="cpu")
    data = json.loads(inventory.read_text())
    inventory.write_text(json.dumps({"sweep": {"children": data}}))
    # The inventory's own group_vars win over the repo's.
    (fleet / "group_vars" / "cpu.yml").write_text("llama_server_port: 8099\n")
    run = playbook(inventory, tmp_path, "elsewhere", "--tags", "plan", "-e", "steps=1",
                   "-e", "env_profiles=threads_1")  # fmt: skip
    assert run.proc.returncode == 0, run.output[-4000:]
    plan = json.loads((run.sweep_dir / "plan.json").read_text())
    entry = plan["hosts"]["sshost1"]["entries"][1]
    argv = entry["argv"]
    assert argv[argv.index("--port") + 1] == "8099"
    home = (REPO / "group_vars" / "cpu.yml").read_text()
    assert "llama_server_home" in home and "/.cache/specsweep/models/" in argv[argv.index("-m") + 1]
    assert entry["env"]["LLAMA_ARG_THREADS"] == "1"  # the repo's threads_1 profile
