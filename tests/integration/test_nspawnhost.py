"""The systemd test host works: real ansible over real SSH to a booted systemd, units start and stop."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from nspawnhost import PYTHON, MakeSystemdHost, NspawnHost, write_inventory
from testhosts import NetnsHosts

UNIT = "specsweep-nspawn-probe.service"
PORT = 8099  # on the container's loopback only


def ansible(
    ansible_bin: Path, env: dict[str, str], inventory: Path, *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run `ansible -i inventory <args> -o`; with check, fail the test on a nonzero rc."""
    cmd = [str(ansible_bin / "ansible"), "-i", str(inventory), "-o", *args]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert not check or res.returncode == 0, f"{cmd} rc={res.returncode}\n{res.stdout}\n{res.stderr}"
    return res


def stdout_by_host(res: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """{host: stdout} from `ansible -o -m command` output lines."""
    lines = [ln.split(" | ", 1) for ln in res.stdout.splitlines() if " | " in ln]
    return {host: rest.rsplit("(stdout) ", 1)[-1] for host, rest in lines}


@pytest.fixture(scope="module")
def inventory(systemd_host: NspawnHost) -> Path:
    return systemd_host.write_inventory(systemd_host.workdir / "hosts.yml")


def test_systemd_boots_and_is_pid_1(
    systemd_host: NspawnHost, inventory: Path, ansible_env: dict[str, str], ansible_bin: Path
) -> None:
    res = ansible(ansible_bin, ansible_env, inventory, "all", "-m", "ansible.builtin.command",
                  "-a", "systemctl is-system-running --wait", check=False)  # fmt: skip
    assert stdout_by_host(res).get(systemd_host.name) in ("running", "degraded"), res.stdout + res.stderr
    res = ansible(ansible_bin, ansible_env, inventory, "all", "-m", "ansible.builtin.shell",
                  "-a", "cat /proc/1/comm; hostname; systemd-detect-virt")  # fmt: skip
    assert stdout_by_host(res) == {systemd_host.name: f"systemd\\n{systemd_host.name}\\nsystemd-nspawn"}
    res = ansible(ansible_bin, ansible_env, inventory, "all", "-m", "ansible.builtin.setup",
                  "-a", "gather_subset=!all,virtual")  # fmt: skip
    facts = json.loads(res.stdout.split(" => ", 1)[1])["ansible_facts"]
    assert facts["ansible_virtualization_role"] == "guest"
    assert facts["ansible_python"]["executable"] == PYTHON
    # From the controller side too: PID 1 in the container is nspawn's child, systemd.
    assert Path(f"/proc/{systemd_host.leader_pid()}/comm").read_text().strip() == "systemd"


def test_unit_starts_and_stops(
    systemd_host: NspawnHost, inventory: Path, ansible_env: dict[str, str], ansible_bin: Path, tmp_path: Path
) -> None:
    unit = (
        "[Unit]\nDescription=specsweep nspawn probe\n\n[Service]\n"
        f"ExecStart={PYTHON} -m http.server {PORT} --bind 127.0.0.1 --directory /etc/systemd\n"
    )
    started = [
        {"name": "Install the unit", "ansible.builtin.copy": {
            "dest": f"/etc/systemd/system/{UNIT}", "content": unit, "mode": "0644",
            "validate": "systemd-analyze verify --man=no %s"}},
        {"name": "Start it", "ansible.builtin.systemd_service": {
            "name": UNIT, "state": "started", "daemon_reload": True}},
        {"name": "It serves on loopback", "ansible.builtin.wait_for": {
            "host": "127.0.0.1", "port": PORT, "timeout": 20}},
        {"name": "Fetch a page", "ansible.builtin.uri": {
            "url": f"http://127.0.0.1:{PORT}/system/", "return_content": True}, "register": "page"},
        {"name": "Its state", "ansible.builtin.systemd_service": {"name": UNIT}, "register": "up"},
        {"ansible.builtin.assert": {"that": [
            "up.status.ActiveState == 'active'", "up.status.SubState == 'running'",
            f"'{UNIT}' in page.content"]}},
        {"name": "Stop it", "ansible.builtin.systemd_service": {"name": UNIT, "state": "stopped"},
         "register": "stop"},
        {"name": "Port closed", "ansible.builtin.wait_for": {
            "host": "127.0.0.1", "port": PORT, "state": "stopped", "timeout": 20}},
        {"name": "Its state after", "ansible.builtin.systemd_service": {"name": UNIT}, "register": "down"},
        {"ansible.builtin.assert": {"that": [
            "stop is changed", "down.status.ActiveState == 'inactive'"]}},
    ]  # fmt: skip
    playbook = tmp_path / "unit.yml"
    playbook.write_text(json.dumps([{"hosts": "all", "gather_facts": False, "tasks": started}], indent=1))
    cmd = [str(ansible_bin / "ansible-playbook"), "-i", str(inventory), str(playbook)]
    res = subprocess.run(cmd, env=ansible_env, capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    # Seen from the controller, through the container's own systemd.
    state = systemd_host.run_in_host(["systemctl", "is-active", UNIT])
    assert state.stdout.strip() == "inactive"
    systemd_host.run_in_host(["rm", "-f", f"/etc/systemd/system/{UNIT}"])
    systemd_host.run_in_host(["systemctl", "daemon-reload"])


def test_attached_host_binds_venv_and_one_inventory(
    make_systemd_host: MakeSystemdHost,
    ssh_hosts: NetnsHosts,
    ansible_env: dict[str, str],
    ansible_bin: Path,
    tmp_path: Path,
) -> None:
    shared = tmp_path / "wheels"
    shared.mkdir()
    (shared / "marker").write_text("from the controller\n")
    host = make_systemd_host("systemd2", netns_hosts=ssh_hosts, binds=[(shared, "/mnt/wheels", True)])
    assert host.bridge == ssh_hosts.bridge and host.key == ssh_hosts.key
    inventory = write_inventory(tmp_path / "mixed.yml", [ssh_hosts, host])
    names = [*ssh_hosts.names, host.name]
    out = stdout_by_host(ansible(ansible_bin, ansible_env, inventory, "all", "-m", "ansible.builtin.command",
                                 "-a", "hostname"))  # fmt: skip
    assert out == {n: n for n in names}
    # The bind is there and read-only; python3-venv makes a working venv with pip.
    script = (
        "cat /mnt/wheels/marker && ! touch /mnt/wheels/x 2>/dev/null"
        " && python3 -m venv /opt/venv && /opt/venv/bin/python -m pip --version >/dev/null"
        " && /opt/venv/bin/python -c 'import sys; print(sys.version_info[:2])'"
    )
    res = ansible(ansible_bin, ansible_env, inventory, host.name, "-m", "ansible.builtin.shell", "-a", script)
    assert stdout_by_host(res)[host.name] == "from the controller\\n(3, 11)"
    assert not (shared / "x").exists()
    # Teardown leaves nothing of this host: processes, network, mounts, files.
    netns, hostdir = f"{host.bridge}-{host.name}", host.hostdir
    veth = f"{host.bridge}n{host.address.rsplit('.', 1)[1]}"
    host.teardown()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=False).stdout
    namespaces = subprocess.run(["ip", "netns"], capture_output=True, text=True, check=False).stdout
    assert f"{veth}@" not in links and netns not in namespaces and ssh_hosts.bridge in links
    assert str(hostdir) not in Path("/proc/self/mountinfo").read_text() and not hostdir.exists()
    host.teardown()  # idempotent
