"""Shared fixtures: real SSH test hosts (tests/testhosts.py) and an ansible environment."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from nspawnhost import APT_PACKAGES as NSPAWN_APT_PACKAGES
from nspawnhost import Bind, MakeSystemdHost, NspawnHost, ensure_rootfs
from nspawnhost import missing_prerequisites as nspawn_missing_prerequisites
from testhosts import APT_PACKAGES, MakeHosts, NetnsHosts, missing_prerequisites

# Test files, slowest first: seconds each took on a 2-core machine, summed over its tests (pytest
# --durations=0 of a whole run, 2026-12-04); unlisted integration files come after them, the other
# unit files last.
# xdist hands whole files out in this order (--dist=loadfile, --no-loadscope-reorder): the long
# ones start first and the many short unit files even out the end. Re-measure when a file changes.
SLOWEST_FIRST = (
    "test_interrupts.py",  # 249
    "test_nightly.py",  # 218
    "test_sweep_faults.py",  # 202
    "test_sweep.py",  # 180
    "test_deploy_rollout.py",  # 150
    "test_fleet_faults.py",  # 80
    "test_deploy_systemd.py",  # 77
    "test_workload_sweeps.py",  # 61
    "test_bench_sweeps.py",  # 61
    "test_shard_faults.py",  # 58
    "test_load_levels.py",  # 58
    "test_sweep_trust.py",  # 55
    "test_steady_load.py",  # 40
    "test_sweep_systemd.py",  # 36
    "test_wait_module.py",  # 28 (unit)
    "test_controls.py",  # 23
    "test_supervisor.py",  # 14 (unit)
    "test_nightly_playbook.py",  # 14 (unit)
    "test_bench_client_llama.py",  # 13
    "test_nspawnhost.py",  # 13
    "test_job_module.py",  # 12 (unit)
)

# The hosts of the `ssh_hosts` fixture; add names here for more hosts (no underscores).
SSH_HOST_NAMES = ("sshost1", "sshost2")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the tests as SLOWEST_FIRST says, each file's own tests in their order."""

    def rank(item: pytest.Item) -> tuple[int, int]:
        path = item.path
        if path.name in SLOWEST_FIRST:
            return (0, SLOWEST_FIRST.index(path.name))
        return (1, 0) if path.parent.name == "integration" else (2, 0)

    items.sort(key=rank)  # stable: the collection's order within a rank


def tear_down(started: Sequence[NetnsHosts | NspawnHost]) -> None:
    """Tear down test hosts, newest first; report every failure once all have been tried."""
    errors = []
    for hosts in reversed(started):
        try:
            hosts.teardown()
        except RuntimeError as exc:
            errors.append(str(exc))
    if errors:
        pytest.fail("\n".join(errors), pytrace=False)


@pytest.fixture(scope="session")
def make_ssh_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MakeHosts]:
    """Factory: make_ssh_hosts(["h1", ...]) starts hosts; all are torn down at session end."""
    problems = missing_prerequisites()
    if problems:  # fail, never skip: CI must provide these
        pytest.fail(
            "SSH test hosts need: " + "; ".join(problems)
            + f" (as root: scripts/setup.sh --tests, or apt-get install -y {' '.join(APT_PACKAGES)})",
            pytrace=False,
        )  # fmt: skip
    started: list[NetnsHosts] = []

    def make(names: Sequence[str]) -> NetnsHosts:
        hosts = NetnsHosts(tmp_path_factory.mktemp("sshosts"), names)
        started.append(hosts)
        return hosts.start()

    yield make
    tear_down(started)


@pytest.fixture(scope="session")
def ssh_hosts(make_ssh_hosts: MakeHosts) -> NetnsHosts:
    """Started SSH hosts SSH_HOST_NAMES, shared by the whole session."""
    return make_ssh_hosts(SSH_HOST_NAMES)


@pytest.fixture(scope="session")
def ansible_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment for ansible subprocesses: a temp ansible.cfg (host key checking on,
    pipelining on) instead of whatever ansible.cfg the cwd or the user has."""
    cfg = tmp_path_factory.mktemp("ansible") / "ansible.cfg"
    cfg.write_text(
        "[defaults]\nhost_key_checking = True\nforks = 10\ntimeout = 20\nnocolor = True\n"
        "[ssh_connection]\npipelining = True\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["ANSIBLE_CONFIG"] = str(cfg)
    return env


@pytest.fixture(scope="session")
def ansible_bin() -> Path:
    """Directory holding the venv's ansible executables (next to the running Python)."""
    return Path(sys.executable).parent


def build_rootfs() -> None:
    """ensure_rootfs(), quietly: a build that fails here is tried again, and told, by the first host."""
    with contextlib.suppress(OSError, RuntimeError):
        ensure_rootfs()


@pytest.fixture(scope="session", autouse=True)
def rootfs_in_background(request: pytest.FixtureRequest) -> None:
    """Build the systemd hosts' rootfs beside the first tests when this session boots such a host.

    On a fresh machine that is a debootstrap of 2 min, much of it downloads; the first systemd host
    (NspawnHost.start) waits for it instead of building it then. Under xdist every worker starts one:
    one builds, the others wait on its lock.
    """
    boots = any("make_systemd_host" in item.fixturenames for item in request.session.items)
    if boots and not nspawn_missing_prerequisites():
        threading.Thread(target=build_rootfs, name="rootfs", daemon=True).start()


# The host of the `systemd_host` fixture (alphanumeric, like SSH_HOST_NAMES).
SYSTEMD_HOST_NAME = "systemd1"


@pytest.fixture(scope="session")
def make_systemd_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MakeSystemdHost]:
    """Factory: make_systemd_host(name, netns_hosts=, binds=) boots a systemd host; all go at session end."""
    problems = nspawn_missing_prerequisites()
    if problems:  # fail, never skip: CI must provide these
        pytest.fail(
            "systemd test hosts need: " + "; ".join(problems)
            + f" (as root: scripts/setup.sh --tests, or apt-get install -y {' '.join(NSPAWN_APT_PACKAGES)})",
            pytrace=False,
        )  # fmt: skip
    started: list[NspawnHost] = []

    def make(name: str, *, netns_hosts: NetnsHosts | None = None, binds: Sequence[Bind] = ()) -> NspawnHost:
        host = NspawnHost(tmp_path_factory.mktemp("nspawn"), name, netns_hosts=netns_hosts, binds=binds)
        started.append(host)
        return host.start()  # the first start of a machine builds the rootfs (~2 min)

    yield make
    tear_down(started)


@pytest.fixture(scope="session")
def systemd_host(make_systemd_host: MakeSystemdHost) -> NspawnHost:
    """A booted systemd host on its own bridge, shared by the session; .write_inventory() as NetnsHosts'."""
    return make_systemd_host(SYSTEMD_HOST_NAME)
