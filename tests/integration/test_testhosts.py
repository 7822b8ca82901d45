"""The SSH test hosts work: real ansible over real SSH, own hostname, own /opt."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
from testhosts import MakeHosts, NetnsHosts


def adhoc(ansible_bin: Path, env: dict[str, str], inventory: Path, *args: str) -> dict[str, str]:
    """Run `ansible <args> -o` and return {host: the part of its line after the status}."""
    cmd = [str(ansible_bin / "ansible"), "-i", str(inventory), "-o", *args]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, f"{cmd} rc={res.returncode}\n{res.stdout}\n{res.stderr}"
    lines = [ln.split(" | ", 1) for ln in res.stdout.splitlines() if " | " in ln]
    return {host: rest for host, rest in lines}


@pytest.fixture(scope="module")
def inventory(ssh_hosts: NetnsHosts) -> Path:
    return ssh_hosts.write_inventory(ssh_hosts.workdir / "hosts.yml")


def test_each_host_has_its_own_hostname(
    ssh_hosts: NetnsHosts,
    inventory: Path,
    ansible_env: dict[str, str],
    ansible_bin: Path,
) -> None:
    out = adhoc(ansible_bin, ansible_env, inventory, "all", "-m", "ansible.builtin.command",
                "-a", "hostname")  # fmt: skip
    assert {h: r.rsplit("(stdout) ", 1)[-1] for h, r in out.items()} == {
        name: name for name in ssh_hosts.names
    }


def test_opt_is_per_host(
    ssh_hosts: NetnsHosts,
    inventory: Path,
    ansible_env: dict[str, str],
    ansible_bin: Path,
) -> None:
    first = ssh_hosts.names[0]
    marker = f"/opt/specsweep-testhosts-{os.getpid()}"
    adhoc(ansible_bin, ansible_env, inventory, first, "-m", "ansible.builtin.copy",
          "-a", f"dest={marker} content={first}")  # fmt: skip
    out = adhoc(ansible_bin, ansible_env, inventory, "all", "-m", "ansible.builtin.stat",
                "-a", f"path={marker}")  # fmt: skip
    exists = {h: json.loads(r.split("=> ", 1)[1])["stat"]["exists"] for h, r in out.items()}
    assert exists == {name: name == first for name in ssh_hosts.names}
    assert not Path(marker).exists()  # nor on the controller
    assert (ssh_hosts.workdir / first / "opt" / Path(marker).name).read_text() == first
    seen = ssh_hosts.run_in_host(first, ["cat", marker])
    assert (seen.returncode, seen.stdout) == (0, first)


def test_host_has_its_own_pid_namespace(ssh_hosts: NetnsHosts) -> None:
    ps = ssh_hosts.run_in_host(ssh_hosts.names[0], ["cat", "/proc/1/comm"])
    assert ps.stdout.strip() == "sshd"
    assert len(ssh_hosts.host_pids(ssh_hosts.names[0])) >= 1


def test_stop_host_and_teardown(make_ssh_hosts: MakeHosts) -> None:
    hosts = make_ssh_hosts(["ssdoomed"])
    address, bridge = hosts.addresses["ssdoomed"], hosts.bridge
    hosts.stop_host("ssdoomed")
    with pytest.raises(OSError):  # netns still there, sshd gone: refused, not timeout
        socket.create_connection((address, 22), timeout=5).close()
    hosts.teardown()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=False).stdout
    netns = subprocess.run(["ip", "netns"], capture_output=True, text=True, check=False).stdout
    assert f"{bridge}" not in links and f"{bridge}-" not in netns
    hosts.teardown()  # idempotent
