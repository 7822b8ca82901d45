"""Real SSH test hosts in network namespaces, for integration tests.

Recipe: /work/shared/reference/test-hosts.md. Each host is a netns on a private bridge
with its own sshd, hostname, pid namespace and /opt; the rest of the filesystem is
shared with the controller, so the controller's Python works on the hosts too.
Stdlib only. Needs root and the Debian packages in APT_PACKAGES.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

SSHD = "/usr/sbin/sshd"
# openssh-server brings openssh-client; util-linux (unshare, setpriv, nsenter) is base.
APT_PACKAGES = ("openssh-server", "iproute2")
TOOLS = ("ip", "unshare", "setpriv", "nsenter", "ssh", "ssh-keygen", "ssh-keyscan")
# The base interpreter has the venv module; the hosts see the same filesystem.
PYTHON = sys.base_prefix + "/bin/python3"
MakeHosts = Callable[[Sequence[str]], "NetnsHosts"]


def missing_prerequisites() -> list[str]:
    """What this machine lacks to run NetnsHosts (empty when all is there)."""
    problems = [] if os.geteuid() == 0 else ["must run as root (netns, bridge, mounts)"]
    problems += [f"{tool} not on PATH" for tool in TOOLS if not shutil.which(tool)]
    if not os.access(SSHD, os.X_OK):
        problems.append(f"{SSHD} missing")
    return problems


def _run(*argv: str) -> str:
    res = subprocess.run(argv, capture_output=True, text=True, check=False)
    if res.returncode:
        err = res.stderr.strip()
        raise RuntimeError(f"{shlex.join(argv)}: rc={res.returncode}: {err}")
    return res.stdout


def _ip(args: str) -> str:
    return _run("ip", *args.split())


def _keygen(path: Path, comment: str) -> None:
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path))


class NetnsHosts:
    """SSH hosts in network namespaces on one bridge; start()/teardown() or `with`."""

    def __init__(self, workdir: Path, names: Sequence[str]) -> None:
        ok = all(n.isalnum() and n[0].isalpha() for n in names)  # `_` breaks hostnames
        if not names or not ok or len(set(names)) != len(names):
            raise ValueError(f"need unique alphanumeric host names: {list(names)}")
        self.workdir = Path(workdir)
        self.names = list(names)
        self.key = self.workdir / "id_ed25519"
        self.known_hosts = self.workdir / "known_hosts"
        self.addresses: dict[str, str] = {}
        self.bridge: str | None = None
        self._netns: dict[str, str] = {}  # host -> netns; only what we created
        self._veths: list[str] = []
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    def start(self, timeout: float = 20.0) -> Self:
        """Create network, keys and sshds; return once every host's sshd answers."""
        try:
            self.workdir.mkdir(parents=True, exist_ok=True)
            _keygen(self.key, "specsweep-test")
            subnet = self._make_bridge()
            # sshd hard-codes this privsep dir; systemd creates it for the system sshd.
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
            for i, name in enumerate(self.names):
                self._make_host(name, f"{subnet}.{10 + i}", i)
            deadline = time.monotonic() + timeout
            for name in self.names:
                self._wait_listening(name, deadline)
            self._keyscan()
        except BaseException:
            self.teardown()
            raise
        return self

    def _make_bridge(self) -> str:
        # One slot number picks bridge name and subnet; `ip link add` failing on an
        # existing name locks a slot against concurrent runs. Foreign subnets are skipped.
        used = _ip("-o -4 addr")
        for k in range(254):
            slot = (os.getpid() + k) % 254 + 1
            if f" 10.231.{slot}." in used:
                continue
            try:
                _ip(f"link add name ssbr{slot} type bridge")
            except RuntimeError as exc:
                if "File exists" in str(exc):
                    continue
                raise
            self.bridge = f"ssbr{slot}"
            _ip(f"addr add 10.231.{slot}.1/24 dev {self.bridge}")
            _ip(f"link set {self.bridge} up")
            return f"10.231.{slot}"
        raise RuntimeError("no free ssbr<N> bridge with free 10.231.<N>.0/24")

    def _make_host(self, name: str, address: str, index: int) -> None:
        netns, veth = f"{self.bridge}-{name}", f"{self.bridge}v{index}"
        _ip(f"netns add {netns}")
        self._netns[name] = netns
        _ip(f"link add {veth} type veth peer name eth0 netns {netns}")
        self._veths.append(veth)
        _ip(f"link set {veth} master {self.bridge} up")
        _ip(f"-n {netns} addr add {address}/24 dev eth0")
        _ip(f"-n {netns} link set eth0 up")
        _ip(f"-n {netns} link set lo up")
        self.addresses[name] = address

        hdir = self.workdir / name
        (hdir / "opt").mkdir(parents=True, exist_ok=True)
        _keygen(hdir / "ssh_host_ed25519_key", name)
        cfg = hdir / "sshd_config"
        cfg.write_text(
            f"ListenAddress {address}:22\nHostKey {hdir}/ssh_host_ed25519_key\n"
            f"PidFile {hdir}/sshd.pid\nAuthorizedKeysFile {self.key}.pub\n"
            "UsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "PrintMotd no\nSubsystem sftp internal-sftp\n"
        )
        _run(SSHD, "-t", "-f", str(cfg))  # config errors fail here, not as a timeout
        script = (
            f"hostname {name} && mount --bind {shlex.quote(str(hdir / 'opt'))} /opt"
            f" && exec {SSHD} -D -e -f {shlex.quote(str(cfg))}"
        )
        # setpriv: if pytest dies, unshare gets SIGKILL and --kill-child takes the
        # host's init (sshd), and so the whole pid namespace, down with it.
        argv = ["setpriv", "--pdeathsig", "KILL", "ip", "netns", "exec", netns]
        argv += ["unshare", "--uts", "--mount", "--pid", "--fork", "--mount-proc"]
        argv += ["--propagation", "private", "--kill-child", "bash", "-c", script]
        with open(hdir / "sshd.log", "ab") as log:
            self._procs[name] = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C must not race the teardown
            )

    def _wait_listening(self, name: str, deadline: float) -> None:
        proc, address = self._procs[name], self.addresses[name]
        while proc.poll() is None:
            try:
                socket.create_connection((address, 22), timeout=0.5).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"sshd of {name} not on {address}:22") from None
            time.sleep(0.02)  # poll interval; the deadline bounds the wait
        log = (self.workdir / name / "sshd.log").read_text(errors="replace")
        raise RuntimeError(f"sshd of {name} exited rc={proc.returncode}:\n{log}")

    def _keyscan(self) -> None:
        ips = [self.addresses[n] for n in self.names]
        out = _run("ssh-keyscan", "-T", "5", "-t", "ed25519", *ips)
        lines = out.splitlines()
        missing = [ip for ip in ips if not any(ln.startswith(ip + " ") for ln in lines)]
        if missing:
            raise RuntimeError(f"ssh-keyscan got no host key from {missing}")
        self.known_hosts.write_text(out)

    def write_inventory(
        self,
        path: Path,
        group: str = "sweep",
        hostvars: Mapping[str, Mapping[str, Any]] | None = None,
        group_vars: Mapping[str, Any] | None = None,
    ) -> Path:
        """Write a YAML inventory (JSON, a YAML subset) with all hosts in `group`.

        hostvars: host name -> extra vars for it; group_vars: the group's vars.
        """
        ssh_args = (
            f"-o UserKnownHostsFile={self.known_hosts} -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes"
        )
        common = {
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(self.key),
            "ansible_ssh_common_args": ssh_args,
            "ansible_python_interpreter": PYTHON,  # pinned: discovery may pick a bad one
            # ControlPersist sockets stay out of ~/.ansible/cp: addresses get reused.
            "ansible_control_path_dir": str(self.workdir / "cp"),
        }
        hostvars = hostvars or {}
        hosts = {n: {"ansible_host": self.addresses[n], **common, **hostvars.get(n, {})}
                 for n in self.names}  # fmt: skip
        inventory = {group: {"hosts": hosts, "vars": dict(group_vars or {})}}
        Path(path).write_text(json.dumps(inventory, indent=2) + "\n")
        return Path(path)

    def _init_pid(self, name: str) -> int:
        """Root-namespace PID of the host's PID 1 (sshd): unshare's only child."""
        pid = self._procs[name].pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if len(children) != 1:
            raise RuntimeError(f"host {name} is not running")
        return int(children[0])

    def host_pids(self, name: str) -> list[int]:
        """Root-namespace PIDs of all processes in the host (i.e. in its netns)."""
        return [int(p) for p in _ip(f"netns pids {self._netns[name]}").split()]

    def run_in_host(self, name: str, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        """Run argv in the host's uts/mount/net/pid namespaces (its /opt, its ps)."""
        ns = ["nsenter", "-t", str(self._init_pid(name)), "-u", "-m", "-n", "-p"]
        return subprocess.run([*ns, *argv], capture_output=True, text=True, check=False)

    def spawn_in_host(self, name: str, argv: Sequence[str]) -> subprocess.Popen[bytes]:
        """Start argv in the background in the host's network; Popen.pid is argv's own process."""
        return subprocess.Popen(["ip", "netns", "exec", self._netns[name], *argv], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip

    def opt_dir(self, name: str) -> Path:
        """The controller-side folder that is the host's /opt."""
        return self.workdir / name / "opt"

    def stop_host(self, name: str, timeout: float = 10.0) -> None:
        """Kill the host and every process in it; its netns and address stay."""
        proc = self._procs.get(name)
        if proc is None:
            return
        # SIGKILL the pid ns init (sshd) so the kernel kills the whole namespace and
        # unshare reaps init and exits. Killing unshare first would orphan init to
        # PID 1, which on this machine reaps zombies only late.
        try:
            init = self._init_pid(name)
            pidfd = os.pidfd_open(init)
            try:  # still unshare's child after pidfd_open: the fd names the right one
                if self._init_pid(name) == init:
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            finally:
                os.close(pidfd)
        except (OSError, RuntimeError):
            pass  # init already gone; unshare exits or is killed below
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()  # our own unreaped child: its PID cannot have been reused
            proc.wait(timeout=timeout)
        del self._procs[name]
        deadline = time.monotonic() + timeout
        while self.host_pids(name):  # the pid ns empties asynchronously after init
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} still runs {self.host_pids(name)}")
            time.sleep(0.02)

    def teardown(self) -> None:
        """Undo what start() did, only that; safe after a partial start and twice."""
        errors: list[str] = []

        def attempt(what: str, fn: Callable[..., object], *args: str) -> None:
            try:
                fn(*args)
            except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
                errors.append(f"{what}: {exc}")  # keep going: remove all we can

        for name in list(self._procs):
            attempt(f"stop {name}", self.stop_host, name)
        for veth in self._veths:
            attempt(veth, _ip, f"link del {veth}")
        for netns in self._netns.values():
            attempt(netns, _ip, f"netns del {netns}")
        if self.bridge:
            attempt(self.bridge, _ip, f"link del {self.bridge}")
        self._veths, self._netns, self.bridge = [], {}, None
        if errors:
            raise RuntimeError("teardown incomplete: " + "; ".join(errors))
