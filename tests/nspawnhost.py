"""A real systemd test host: a Debian rootfs booted by systemd-nspawn, reachable over SSH.

Recipe: /work/shared/reference/test-hosts.md ("A real systemd host"). The rootfs is built
once by debootstrap and cached (ensure_rootfs); each NspawnHost boots its own overlay (or
copy) of it in its own netns, on a bridge like tests/testhosts.py makes, or on the bridge
of a started NetnsHosts, so one inventory can hold both kinds (write_inventory).
Stdlib only. Needs root and the Debian packages in APT_PACKAGES.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Self

from testhosts import NetnsHosts, _ip, _keygen, _run

REPO = Path(__file__).resolve().parents[1]
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
# What the container gets; changing it (or RECIPE) changes rootfs_key(), so it is rebuilt.
PACKAGES = ("systemd", "systemd-sysv", "dbus", "python3", "python3-venv", "iproute2", "openssh-server")
PACKAGES += ("libgomp1",)  # the xllamacpp wheel's libllama needs libgomp.so.1; minbase lacks it
RECIPE = 1  # bump when _build() changes
CACHE_ENV = "SPECSWEEP_NSPAWN_CACHE"
COMPLETE = ".specsweep-rootfs-complete"  # written last, before the atomic rename
# Controller side. ssh/ssh-keygen/ssh-keyscan come with openssh-server (tests/testhosts.py).
APT_PACKAGES = ("systemd-container", "debootstrap", "openssh-client", "iproute2")
TOOLS = ("debootstrap", "systemd-nspawn", "ip", "nsenter", "setpriv", "mount", "umount")
TOOLS += ("ssh-keygen", "ssh-keyscan")
PROPAGATE = Path("/run/systemd/nspawn/propagate")  # nspawn makes <machine>/ here
PYTHON = "/usr/bin/python3"  # bookworm's python3 (3.11) inside the container
# run_in_host's environment: the controller's (PATH, PIP_*, ...) means nothing in there.
CONTAINER_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
}
# Container units that would reach for the network or do maintenance mid-test.
DISABLED_UNITS = ("apt-daily.timer", "apt-daily-upgrade.timer", "e2scrub_all.timer", "fstrim.timer")
Bind = tuple[str | Path, str, bool]  # (host path, container path, read-only)
CopyMode = Literal["auto", "overlay", "cp"]
MakeSystemdHost = Callable[..., "NspawnHost"]


def missing_prerequisites() -> list[str]:
    """What this machine lacks to run NspawnHost (empty when all is there)."""
    problems = [] if os.geteuid() == 0 else ["must run as root (debootstrap, netns, mounts)"]
    return problems + [f"{tool} not on PATH" for tool in TOOLS if not shutil.which(tool)]


def cache_root() -> Path:
    """Folder of the cached rootfs: $SPECSWEEP_NSPAWN_CACHE, else .cache/nspawn-rootfs."""
    return Path(os.environ.get(CACHE_ENV) or REPO / ".cache" / "nspawn-rootfs")


def rootfs_key() -> str:
    """Name of the cached rootfs; it changes with suite, mirror, packages and recipe."""
    spec = f"{SUITE}\n{MIRROR}\nminbase\n{','.join(sorted(PACKAGES))}\n{RECIPE}"
    return f"{SUITE}-{hashlib.sha256(spec.encode()).hexdigest()[:12]}"


def _mounts_below(path: Path) -> list[str]:
    """Mount points at or below path, deepest first."""
    prefix = str(path.resolve())
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")  # \040 etc.
            if point == prefix or point.startswith(prefix + "/"):
                points.append(point)
    return sorted(points, key=len, reverse=True)


def remove_tree(path: Path) -> None:
    """rm -rf path, first unmounting whatever is mounted in it (a killed debootstrap's /proc)."""
    if not os.path.lexists(path):
        return
    for point in _mounts_below(path):
        _run("umount", "--lazy", point)
    _run("rm", "-rf", "--one-file-system", str(path))


def ensure_rootfs(cache: Path | None = None) -> Path:
    """The cached rootfs, built first if missing: into a temp dir, then renamed into place."""
    cache = cache or cache_root()
    final = cache / rootfs_key()
    if (final / COMPLETE).exists():
        return final
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder; the others wait here, then reuse
        if (final / COMPLETE).exists():
            return final
        for stale in cache.glob(".build-*"):  # only a lock holder builds: these are dead
            remove_tree(stale)
        tmp = cache / f".build-{final.name}-{os.getpid()}"
        _build(tmp, cache / f"{final.name}.log", lock.fileno())
        (tmp / COMPLETE).write_text(f"{SUITE} {MIRROR} {' '.join(PACKAGES)} recipe={RECIPE}\n")
        remove_tree(final)  # a leftover without the marker
        os.rename(tmp, final)
    return final


def _build(root: Path, log: Path, lock_fd: int) -> None:
    """debootstrap root, then trim it and set it up to boot under systemd-nspawn."""
    # debootstrap dies with us; its children (dpkg, ...) inherit the lock, so a next
    # builder waits for them before it removes this half-built root.
    argv = ["setpriv", "--pdeathsig", "KILL", "debootstrap", "--variant=minbase"]
    argv += [f"--include={','.join(PACKAGES)}", SUITE, str(root), MIRROR]
    start = time.monotonic()
    with open(log, "w") as out:
        res = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            pass_fds=(lock_fd,),
            check=False,
        )
    if res.returncode:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-30:])
        took = time.monotonic() - start
        raise RuntimeError(f"{' '.join(argv)}: rc={res.returncode} after {took:.0f}s, log {log}:\n{tail}")
    # The container has no network: apt lists and caches only cost copy time.
    for junk in ("var/lib/apt/lists", "var/cache/apt"):
        for entry in (root / junk).rglob("*"):
            if entry.is_file() or entry.is_symlink():
                entry.unlink()
    # Per-host identity is written by NspawnHost; none may be shared by accident.
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    (root / "etc/machine-id").write_text("")
    (root / "etc/hostname").write_text("localhost\n")
    _run("systemctl", f"--root={root}", "enable", "ssh.service")
    _run("systemctl", f"--root={root}", "disable", *DISABLED_UNITS)


def _pidfd_kill(pid: int, netns_ino: int) -> None:
    """SIGKILL pid if it still lives in the netns with inode netns_ino (no PID reuse race)."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return  # gone
    try:  # checked after pidfd_open: the fd names the process we checked
        if os.stat(f"/proc/{pid}/ns/net").st_ino == netns_ino:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        pass  # exited meanwhile
    finally:
        os.close(pidfd)


class NspawnHost:
    """One systemd host (systemd-nspawn -b) with sshd, in its own netns; start()/teardown() or `with`."""

    def __init__(
        self,
        workdir: Path,
        name: str = "systemd1",
        *,
        netns_hosts: NetnsHosts | None = None,
        binds: Sequence[Bind] = (),
        cache: Path | None = None,
        copy: CopyMode = "auto",
    ) -> None:
        if not (name.isalnum() and name[0].isalpha()):  # as NetnsHosts: `_` breaks hostnames
            raise ValueError(f"need an alphanumeric host name: {name!r}")
        if netns_hosts is not None and not netns_hosts.bridge:
            raise ValueError("netns_hosts must be started: its bridge is attached to")
        for src, dst, _ro in binds:
            if ":" in f"{src}{dst}" or not Path(src).is_absolute() or not dst.startswith("/"):
                raise ValueError(f"bind paths must be absolute and without ':': {src} -> {dst}")
        self.workdir = Path(workdir)
        self.name = name
        self.names = [name]  # as NetnsHosts
        self.netns_hosts = netns_hosts
        self.binds = [(str(src), dst, ro) for src, dst, ro in binds]
        self.cache = cache
        self.copy = copy
        # One key for all hosts of an inventory: that of the attached NetnsHosts.
        self.key = netns_hosts.key if netns_hosts else self.workdir / "id_ed25519"
        self.known_hosts = self.workdir / "known_hosts"
        self.hostdir = self.workdir / name
        self.root = self.hostdir / "root"  # the container's /
        self.log = self.workdir / f"{name}-nspawn.log"  # kept after teardown
        self.addresses: dict[str, str] = {}
        self.bridge: str | None = None
        self.copy_used: str | None = None  # "overlay" or "cp", once made
        self.pid: int | None = None  # the wrapper around nspawn (unshare); nspawn_pid() for nspawn
        self._own_bridge = False
        self._netns: str | None = None  # only what we created
        self._veth: str | None = None
        self._overlay: str | None = None  # overlay mount options, if one is used
        self._slot = 0  # the host's slot on the bridge: veth name and address
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """The host's address on the bridge."""
        return self.addresses[self.name]

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    def start(self, timeout: float = 60.0) -> Self:
        """Build/reuse the rootfs, make network and copy, boot; return once sshd answers and systemd is up."""
        try:
            lower = ensure_rootfs(self.cache)
            self.hostdir.mkdir(parents=True, exist_ok=True)
            if self.netns_hosts is None and not self.key.exists():
                _keygen(self.key, "specsweep-test")
            subnet = self._attach_network()
            self._make_root(lower)
            self._personalize(f"{subnet}.{self._slot}")
            self._boot()
            deadline = time.monotonic() + timeout
            self._wait_listening(deadline)
            self._keyscan()
            self._wait_running(deadline)
        except BaseException:
            self.teardown()
            raise
        return self

    def _attach_network(self) -> str:
        """Bridge (attached or own), netns and veth; returns the bridge's /24 prefix."""
        if self.netns_hosts is not None:
            self.bridge = self.netns_hosts.bridge
        else:
            self._make_bridge()
        assert self.bridge
        addr = _ip(f"-o -4 addr show dev {self.bridge}").split()[3]  # 10.231.N.1/24
        subnet = addr.rsplit(".", 1)[0]
        netns = f"{self.bridge}-{self.name}"  # NetnsHosts' naming: a clash fails here
        _ip(f"netns add {netns}")
        self._netns = netns
        # A slot per nspawn host on the bridge: veth <bridge>n<k>, address .<k>. `ip link add`
        # failing on an existing name locks the slot, as NetnsHosts' bridge slots.
        for k in range(100, 250):
            veth = f"{self.bridge}n{k}"
            try:
                _ip(f"link add {veth} type veth peer name eth0 netns {netns}")
            except RuntimeError as exc:
                if "File exists" in str(exc):
                    continue
                raise
            self._veth, self._slot = veth, k
            break
        else:
            raise RuntimeError(f"no free nspawn slot on {self.bridge}")
        address = f"{subnet}.{self._slot}"
        _ip(f"link set {self._veth} master {self.bridge} up")
        # Configured from outside before boot: nothing in the container manages the network.
        _ip(f"-n {netns} addr add {address}/24 dev eth0")
        _ip(f"-n {netns} link set eth0 up")
        _ip(f"-n {netns} link set lo up")
        self.addresses[self.name] = address
        return subnet

    def _make_bridge(self) -> None:
        """An own ssbr<N> bridge with 10.231.<N>.1/24, slots shared with NetnsHosts."""
        used = _ip("-o -4 addr")
        for k in range(254):
            slot = (os.getpid() + 127 + k) % 254 + 1  # away from NetnsHosts' first pick
            if f" 10.231.{slot}." in used:
                continue
            try:
                _ip(f"link add name ssbr{slot} type bridge")
            except RuntimeError as exc:
                if "File exists" in str(exc):
                    continue
                raise
            self.bridge, self._own_bridge = f"ssbr{slot}", True
            _ip(f"addr add 10.231.{slot}.1/24 dev {self.bridge}")
            _ip(f"link set {self.bridge} up")
            return
        raise RuntimeError("no free ssbr<N> bridge with free 10.231.<N>.0/24")

    def _make_root(self, lower: Path) -> None:
        """The host's writable root: an overlay on the cached rootfs, else a full copy."""
        usable = not any(c in str(p) for p in (lower, self.hostdir) for c in ",:")  # mount -o syntax
        if self.copy == "overlay" or (self.copy == "auto" and usable):
            upper, work = self.hostdir / "upper", self.hostdir / "ovlwork"
            for d in (upper, work, self.root):
                d.mkdir()
            try:
                self._overlay = f"lowerdir={lower},upperdir={upper},workdir={work}"
                # Mounted here only to personalize; _boot() mounts it again where only the
                # container sees it, so a killed session leaves no mount behind.
                _run("mount", "-t", "overlay", "overlay", "-o", self._overlay, str(self.root))
                self.copy_used = "overlay"
                return
            except RuntimeError:
                self._overlay = None
                if self.copy == "overlay":
                    raise
            for d in (upper, work, self.root):
                d.rmdir()
        _run("cp", "-a", "--reflink=auto", str(lower), str(self.root))
        self.copy_used = "cp"

    def _personalize(self, address: str) -> None:
        """Hostname, machine id, host key, sshd settings and the test key in the root."""
        root = self.root
        (root / "etc/hostname").write_text(f"{self.name}\n")
        (root / "etc/machine-id").write_text(uuid.uuid4().hex + "\n")  # else first boot
        _keygen(root / "etc/ssh/ssh_host_ed25519_key", self.name)
        (root / "etc/ssh/sshd_config.d/specsweep.conf").write_text(
            f"ListenAddress {address}:22\nHostKey /etc/ssh/ssh_host_ed25519_key\n"
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
        )
        ssh_dir = root / "root/.ssh"
        ssh_dir.mkdir(mode=0o700, exist_ok=True)
        auth = ssh_dir / "authorized_keys"
        auth.write_text(Path(f"{self.key}.pub").read_text())
        auth.chmod(0o600)
        wants = root / "etc/systemd/system/multi-user.target.wants/ssh.service"
        if not wants.is_symlink():
            raise RuntimeError(f"ssh.service not enabled in {root}: rebuild the rootfs cache")

    def _boot(self) -> None:
        """Start systemd-nspawn -b in the background, in a wrapper that takes it down with us."""
        assert self._netns
        nspawn = ["systemd-nspawn", "-D", str(self.root), "-b", "--register=no", "--keep-unit"]
        nspawn += [f"--network-namespace-path=/run/netns/{self._netns}", "--console=pipe"]
        nspawn += [f"--machine={self._netns}", f"--hostname={self.name}", "--link-journal=no"]
        nspawn += [f"--bind{'-ro' if ro else ''}={src}:{dst}" for src, dst, ro in self.binds]
        script = f"exec {shlex.join(nspawn)}"
        if self._overlay:
            _run("umount", str(self.root))
            script = f"mount -t overlay overlay -o {shlex.quote(self._overlay)} {self.root} && {script}"
        # nspawn's death alone leaves the container running. So nspawn runs as init of a
        # pid namespace: if pytest dies, setpriv's pdeathsig kills unshare, --kill-child
        # kills nspawn, and the kernel the whole namespace, container included. The
        # private mount namespace holds the overlay mount and goes with it.
        argv = ["setpriv", "--pdeathsig", "KILL", "unshare", "--pid", "--fork", "--kill-child"]
        argv += ["--mount", "--propagation", "private", "bash", "-c", script]
        with open(self.log, "ab") as log:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C must not race the teardown
            )
        self.pid = self._proc.pid

    def _check_alive(self) -> None:
        """Raise with the nspawn log if the container has exited."""
        assert self._proc
        if self._proc.poll() is not None:
            log = self.log.read_text(errors="replace")[-4000:]
            raise RuntimeError(f"systemd-nspawn for {self.name} exited rc={self._proc.returncode}:\n{log}")

    def _wait_listening(self, deadline: float) -> None:
        """Poll until sshd accepts on port 22, the container exits, or the deadline."""
        while True:
            self._check_alive()
            try:
                socket.create_connection((self.address, 22), timeout=0.5).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"sshd of {self.name} not on {self.address}:22") from None
            time.sleep(0.02)  # poll interval; the deadline bounds the wait

    def _keyscan(self) -> None:
        """Write the host's ed25519 key to known_hosts."""
        out = _run("ssh-keyscan", "-T", "5", "-t", "ed25519", self.address)
        if not any(ln.startswith(self.address + " ") for ln in out.splitlines()):
            raise RuntimeError(f"ssh-keyscan got no host key from {self.address}")
        self.known_hosts.write_text(out)

    def _wait_running(self, deadline: float) -> None:
        """Wait for systemd in the container to finish booting (running or degraded)."""
        left = max(1.0, deadline - time.monotonic())
        cmd = ["timeout", f"{left:.0f}", "systemctl", "is-system-running", "--wait"]
        res = self.run_in_host(cmd)
        state = res.stdout.strip()
        if state not in ("running", "degraded"):
            raise RuntimeError(f"systemd in {self.name}: {state!r} rc={res.returncode} {res.stderr.strip()}")

    def nspawn_pid(self) -> int:
        """Root-namespace PID of systemd-nspawn: the only child of unshare (self.pid)."""
        if self._proc is None or self._proc.poll() is not None:
            raise RuntimeError(f"host {self.name} is not running")
        pid = self._proc.pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if len(children) != 1:
            raise RuntimeError(f"host {self.name} has no systemd-nspawn")
        return int(children[0])

    def leader_pid(self) -> int:
        """Root-namespace PID of the container's PID 1 (systemd): nspawn's child with NSpid 1."""
        pid = self.nspawn_pid()
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            status = Path(f"/proc/{child}/status").read_text()
            nspid = next(ln for ln in status.splitlines() if ln.startswith("NSpid:")).split()
            if len(nspid) > 3 and nspid[-1] == "1":  # host, nspawn's ns, the container's
                return int(child)
        raise RuntimeError(f"host {self.name} has no container init yet")

    def host_pids(self) -> list[int]:
        """Root-namespace PIDs of all processes in the host's netns (container and nspawn)."""
        return [int(p) for p in _ip(f"netns pids {self._netns}").split()] if self._netns else []

    def run_in_host(self, argv: Sequence[str], timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """Run argv inside the container (its mount, uts, ipc, net, pid and cgroup namespaces)."""
        ns = ["nsenter", "-t", str(self.leader_pid()), "-m", "-u", "-i", "-n", "-p", "-C", "--"]
        return subprocess.run(
            [*ns, *argv], env=CONTAINER_ENV, capture_output=True, text=True, timeout=timeout, check=False
        )

    def inventory_hosts(self, hostvars: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
        """Inventory entry {name: vars} of this host, as NetnsHosts.write_inventory writes them."""
        ssh_args = (
            f"-o UserKnownHostsFile={self.known_hosts} -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes"
        )
        entry = {
            "ansible_host": self.address,
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(self.key),
            "ansible_ssh_common_args": ssh_args,
            "ansible_python_interpreter": PYTHON,
            "ansible_control_path_dir": str(self.workdir / "cp"),
        }
        return {self.name: {**entry, **(hostvars or {}).get(self.name, {})}}

    def write_inventory(
        self,
        path: Path,
        group: str = "sweep",
        hostvars: Mapping[str, Mapping[str, Any]] | None = None,
        group_vars: Mapping[str, Any] | None = None,
    ) -> Path:
        """Write a YAML (JSON) inventory with this host in `group`, as NetnsHosts.write_inventory."""
        return write_inventory(path, [self], group, hostvars, group_vars)

    def stop(self, timeout: float = 30.0) -> None:
        """Power the container off (SIGTERM to nspawn), SIGKILL what is left after timeout."""
        proc = self._proc
        if proc is not None:
            try:  # nspawn turns SIGTERM into --kill-signal (SIGRTMIN+3 with -b): orderly halt
                nspawn = self.nspawn_pid()
                pidfd = os.pidfd_open(nspawn)
                try:  # still unshare's child after pidfd_open: the fd names the right one
                    if self.nspawn_pid() == nspawn:
                        signal.pidfd_send_signal(pidfd, signal.SIGTERM)
                finally:
                    os.close(pidfd)
            except (OSError, RuntimeError):
                pass  # nspawn already gone; unshare exits or is killed below
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()  # our unreaped child; --kill-child takes nspawn and the container
                proc.wait(timeout=timeout)
            self._proc = None
        if not self._netns:
            return
        # Whatever still runs in our netns was started by our container.
        ino = os.stat(f"/run/netns/{self._netns}").st_ino
        deadline = time.monotonic() + timeout
        while pids := self.host_pids():
            for pid in pids:
                _pidfd_kill(pid, ino)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} still runs {pids}")
            time.sleep(0.02)  # the pid namespace empties asynchronously

    def teardown(self) -> None:
        """Undo what start() did, only that; safe after a partial start and twice."""
        errors: list[str] = []

        def attempt(what: str, fn: Callable[..., object], *args: Any) -> None:
            try:
                fn(*args)
            except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
                errors.append(f"{what}: {exc}")  # keep going: remove all we can

        attempt(f"stop {self.name}", self.stop)
        attempt(f"remove {self.hostdir}", remove_tree, self.hostdir)  # unmounts the overlay
        if self._netns:  # nspawn's per-machine dir, left behind when nspawn was killed
            with contextlib.suppress(OSError):  # gone, or not empty: not ours to force
                (PROPAGATE / self._netns).rmdir()
        if self._veth:
            attempt(self._veth, _ip, f"link del {self._veth}")
        if self._netns:
            attempt(self._netns, _ip, f"netns del {self._netns}")
        if self.bridge and self._own_bridge:
            attempt(self.bridge, _ip, f"link del {self.bridge}")
        self._veth, self._netns, self.bridge, self._own_bridge, self.pid = None, None, None, False, None
        if errors:
            raise RuntimeError("teardown incomplete: " + "; ".join(errors))


def write_inventory(
    path: Path,
    hosts: Sequence[NetnsHosts | NspawnHost],
    group: str = "sweep",
    hostvars: Mapping[str, Mapping[str, Any]] | None = None,
    group_vars: Mapping[str, Any] | None = None,
) -> Path:
    """Write one YAML (JSON) inventory with the hosts of NetnsHosts and NspawnHosts in `group`."""
    entries: dict[str, Any] = {}
    for h in hosts:
        if isinstance(h, NspawnHost):
            part = h.inventory_hosts(hostvars)
        else:  # NetnsHosts writes its own entries; reuse them as written
            tmp = h.write_inventory(Path(path).with_suffix(".part.json"), group, hostvars)
            part = json.loads(tmp.read_text())[group]["hosts"]
            tmp.unlink()
        if entries.keys() & part.keys():
            raise ValueError(f"duplicate host names: {sorted(entries.keys() & part.keys())}")
        entries.update(part)
    inventory = {group: {"hosts": entries, "vars": dict(group_vars or {})}}
    Path(path).write_text(json.dumps(inventory, indent=2) + "\n")
    return Path(path)


if __name__ == "__main__":  # `python tests/nspawnhost.py`: build the rootfs ahead of the tests (.ci/run)
    print(ensure_rootfs())
