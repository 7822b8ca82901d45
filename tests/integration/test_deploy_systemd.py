"""deploy.yml on the systemd host: the production unit rendered, validated, started, serving the
recommended argv on deploy_port; and a canary that fails its gate put back on the unit before it."""

from __future__ import annotations

import re
from pathlib import Path

from nspawnhost import NspawnHost
from sweeps import playbook
from test_deploy_rollout import PORT, deploy

from analysis.deploy.choice import HostInput, choose

HOST = "systemd2"
UNIT = "specsweep-serve.service"


def served(host: NspawnHost) -> dict:
    """The production unit's file, state and the argv of its main process."""

    def show(prop: str) -> str:
        return host.run_in_host(["systemctl", "show", "-p", prop, "--value", UNIT]).stdout.strip()

    pid = show("MainPID")
    cmdline = host.run_in_host(["cat", f"/proc/{pid}/cmdline"]).stdout if pid != "0" else ""
    return {
        "unit": host.run_in_host(["cat", f"/etc/systemd/system/{UNIT}"]).stdout,
        "state": show("ActiveState"),
        "pid": pid,
        "argv": cmdline.split("\0")[:-1],
    }


def test_deploy_serves_the_recommended_argv_as_a_unit_and_a_failed_gate_puts_the_unit_back(
    systemd_inventory: Path, systemd_sweep_host: NspawnHost, tmp_path: Path
) -> None:
    sweep = playbook(
        systemd_inventory, tmp_path, "sddeploy", "-e", "steps=1", "-e", "repeats=2", "-e", "max_tokens=24",
        "-e", "warmup=0", "-e", "bench_requests=2",
    )  # fmt: skip
    assert sweep.proc.returncode == 0, sweep.output[-4000:]
    target = choose(sweep.sweep_dir, [HostInput(HOST, PORT)])[HOST]
    # A busy 2-core machine must not fail the gate of a good deploy.
    good = deploy(systemd_inventory, sweep.sweep_dir, "-e", "deploy_gate_tolerance_pct=60")
    out = good.stdout + good.stderr
    assert good.returncode == 0, out[-4000:]
    assert f"{HOST}: now serving {target['config']} of sweep sddeploy on port {PORT} (systemd)" in out, out[
        -3000:
    ]
    first = served(systemd_sweep_host)
    assert first["state"] == "active" and first["argv"] == target["argv"], (first, target["argv"])
    assert f'"--port" "{PORT}"' in first["unit"], first["unit"]
    verify = systemd_sweep_host.run_in_host(
        ["systemd-analyze", "verify", "--man=no", f"/etc/systemd/system/{UNIT}"]
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr

    # The other config, with a gate no server can meet: rolled back to the unit as it was.
    other = "baseline" if target["config"] != "baseline" else "s1"
    bad = deploy(
        systemd_inventory, sweep.sweep_dir, "-e", f"config={other}", "-e", "deploy_gate_tolerance_pct=-1000"
    )
    out = bad.stdout + bad.stderr
    assert bad.returncode != 0, out[-4000:]
    assert re.search(
        rf"{HOST}: gate tok/s failed: [\d.]+ tok/s, below the sweep's floor [\d.]+ \(median [\d.]+\); "
        rf"rolled back to {target['config']} of sweep sddeploy",
        out,
    ), out[-4000:]
    back = served(systemd_sweep_host)
    assert back["unit"] == first["unit"] and back["state"] == "active", back
    assert back["argv"] == target["argv"] and back["pid"] != first["pid"], (back, first)  # restarted on it
    leftover = systemd_sweep_host.run_in_host(["ls", "/var/tmp/specsweep/deploy"]).stdout
    assert "deployed.json" in leftover and f"{UNIT}.before" not in leftover, leftover
