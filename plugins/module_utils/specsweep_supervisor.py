"""The host-side watchdog of one inference server (stdlib only).

specsweep_server starts a supervisor detached (`launch`). The supervisor leads its own session and
process group, starts the server in that group and writes the pid record; it then waits for the
server and records how it ended. It also holds the run's lease: when the sweep that launched the
server stops renewing the host's lock (its controller died or was cut off), or the lock is gone or
another run's, it stops the server (and the run's benchmark client) and releases the lock itself.

It runs from source (`python -I -c BOOT`, the sources on stdin): the module's files are gone once the
module exits. specsweep_proc travels with it the same way.

Pid record (the pidfile, JSON, always replaced atomically):
  pid, start_ticks                 the supervisor, leader of the group: what a stop signals
  server_pid, server_start_ticks   the server (the supervisor's child, in the same group)
  argv, log_path, started_at, run_id, lease_path, lease_s, job_path
  exit                             added once the server has exited: returncode (negative: the
                                   signal), signal and signal_name (null for a plain exit),
                                   exited_at, and reason (why the supervisor stopped it, else null)
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
import time

from ansible.module_utils.specsweep_proc import (
    group_members,
    proc_start_ticks,
    read_pidfile,
    stop_group,
    wait_until,
    write_json_atomic,
)

# Seconds between two looks at the lease; the server's exit wakes the supervisor at once.
POLL_S = 1.0
# Seconds the benchmark client gets between SIGTERM and SIGKILL when the lease ends.
CLIENT_GRACE_S = 10.0

# Runs the supervisor from the sources it reads on stdin: specsweep_proc under the name its import
# uses, then this file, then supervise(args).
BOOT = (
    "import json, sys, types\n"
    "payload = json.load(sys.stdin)\n"
    "for name, key in (('ansible.module_utils.specsweep_proc', 'proc'), ('specsweep_supervisor', 'self')):\n"
    "    module = sys.modules[name] = types.ModuleType(name)\n"
    "    exec(compile(payload[key], name, 'exec'), module.__dict__)\n"
    "module.supervise(payload['args'])\n"
)


def _held(path: str, run_id: str) -> dict | None:
    """The lock's record when run `run_id` holds it, else None."""
    try:
        with open(path, encoding="utf-8") as f:
            holder = json.load(f)
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) and holder.get("run_id") == run_id else None


def renew_lease(path: str, run_id: str) -> bool:
    """Touch the lock's mtime when run `run_id` holds it; True when renewed."""
    try:
        if _held(path, run_id) is None:
            return False
        os.utime(path)
    except OSError:
        return False
    return True


def record_started(path: str, run_id: str, what: str, record: dict) -> bool:
    """Add the pid record of what run `run_id` started (`client`: the benchmark client, which
    releasing the host stops first; `server`: the server's group, which the next run's preflight
    names if it outlives the run) to the lock when that run holds it; renews the lease too. True
    when recorded."""
    holder = _held(path, run_id)
    if holder is None:
        return False
    try:
        write_json_atomic(path, {**holder, what: record})
    except OSError:
        return False
    return True


def stop_client(client: object) -> None:
    """Stop a benchmark client by its specsweep_job record (as the lock or the job file keeps it)
    when it still runs: its group only, and only while its leader has the recorded start time."""
    if isinstance(client, dict) and isinstance(client.get("pid"), int):
        stop_group(client, CLIENT_GRACE_S)


def lease_problem(path: str, run_id: str, lease_s: float) -> str | None:
    """Why run `run_id` no longer holds its lease on `path`, or None while it does."""
    try:
        age = time.time() - os.stat(path).st_mtime
    except FileNotFoundError:
        return f"lease lost: the lock {path} is gone"
    except OSError:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            holder = json.load(f)
    except (OSError, ValueError):
        holder = None  # being written (acquire writes after it creates): only its age counts
    if isinstance(holder, dict) and holder.get("run_id") != run_id:
        return f"lease lost: the lock {path} is held by run {holder.get('run_id')} now"
    if age > lease_s:
        return f"lease expired: the lock {path} was not renewed for {age:.0f} s (lease {lease_s:g} s)"
    return None


def exit_status(returncode: int) -> dict:
    """A Popen return code as the record keeps it."""
    sig = -returncode if returncode < 0 else None
    return {
        "returncode": returncode,
        "signal": sig,
        "signal_name": signal.Signals(sig).name if sig else None,
    }


def describe_exit(status: dict) -> str:
    """'exit status 3' or 'signal 9: SIGKILL', for messages."""
    if status.get("signal"):
        return f"signal {status['signal']}: {status['signal_name']}"
    return f"exit status {status['returncode']}"


def server_running(record: dict) -> bool:
    """True while the recorded server (same pid and start time) runs."""
    pid = record.get("server_pid")
    return isinstance(pid, int) and proc_start_ticks(pid) == record.get("server_start_ticks")


def server_exit(pidfile: str, settle_s: float = 2.0) -> dict | None:
    """How the server of `pidfile` ended, once it has: the supervisor records it within moments of
    the exit, so wait up to `settle_s` for that; None when there is no such record."""
    found: list[dict] = []

    def recorded() -> bool:
        record = read_pidfile(pidfile)
        if record is not None and isinstance(record.get("exit"), dict):
            found.append(record["exit"])
        return bool(found)

    wait_until(recorded, settle_s, interval_s=0.05)
    return found[0] if found else None


def launch(args: dict, log, env: dict) -> subprocess.Popen:
    """Start a supervisor for `args` in a new session, its output (and the server's) in `log`.

    args: argv, env, cwd, pidfile, log_path, stop_grace_s, and for the lease run_id, lease_path,
    lease_s (None: no lease) and job_path (the benchmark client's specsweep_job path, or None).
    """
    payload = {
        "proc": inspect.getsource(inspect.getmodule(write_json_atomic)),
        "self": inspect.getsource(sys.modules[__name__]),
        "args": args,
    }
    proc = subprocess.Popen(
        # The two trailing words only name the process in `ps`.
        [sys.executable, "-I", "-c", BOOT, "specsweep-supervisor", args["pidfile"]],
        stdin=subprocess.PIPE,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd="/",
        start_new_session=True,
        close_fds=True,
    )
    with proc.stdin:
        proc.stdin.write(json.dumps(payload).encode())
    return proc


def _say(line: str) -> None:
    """One line into the server log (the supervisor's stderr is the log)."""
    print(f"specsweep supervisor: {line}", file=sys.stderr, flush=True)


def _others() -> list[dict]:
    """The live processes of the supervisor's group other than itself."""
    return [m for m in group_members(os.getpid()) if m["pid"] != os.getpid()]


def _stop_server(server: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM (with SIGCONT) the group, the supervisor aside; SIGKILL the server after `grace_s`."""
    os.killpg(os.getpid(), signal.SIGTERM)
    os.killpg(os.getpid(), signal.SIGCONT)
    if not wait_until(lambda: server.poll() is not None, grace_s, interval_s=0.1):
        server.kill()  # our own unreaped child: its pid cannot belong to anyone else


def _release(path: str, run_id: str) -> None:
    """Remove the lock when this run still holds it."""
    try:
        with open(path, encoding="utf-8") as f:
            mine = json.load(f).get("run_id") == run_id
        if mine:
            os.unlink(path)
    except (OSError, ValueError, AttributeError):
        pass


def supervise(args: dict) -> None:
    """Start the server, watch it and the lease until it exits, record the exit; see the module doc."""
    # A handler, not SIG_IGN (which the server would inherit): a stop's SIGTERM reaches the whole
    # group, and the supervisor stays to record how the server ended.
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        server = subprocess.Popen(
            args["argv"], stdin=subprocess.DEVNULL, env=args["env"], cwd=args["cwd"], close_fds=True
        )
    except OSError as exc:
        _say(f"cannot start the server: {exc}")
        sys.exit(127)
    # Blocked, SIGCHLD wakes sigtimedwait the moment the server exits.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    record = {
        "pid": os.getpid(),
        "start_ticks": proc_start_ticks(os.getpid()),
        "server_pid": server.pid,
        "server_start_ticks": proc_start_ticks(server.pid),
        **{key: args[key] for key in ("argv", "log_path", "run_id", "lease_path", "lease_s", "job_path")},
        "started_at": time.time(),
    }
    try:
        write_json_atomic(args["pidfile"], record)
    except OSError as exc:
        server.kill()  # nothing could stop a server without a record
        server.wait()
        _say(f"cannot write the pid record: {exc}; the server was stopped")
        sys.exit(1)

    reason = None
    while server.poll() is None and reason is None:
        if args["lease_path"]:
            reason = lease_problem(args["lease_path"], args["run_id"], args["lease_s"])
        if reason is None:
            signal.sigtimedwait([signal.SIGCHLD], POLL_S)
    if reason is not None:
        _say(f"{reason}: stopping the server and this run's benchmark client, releasing the lock")
        stop_client(read_pidfile(f"{args['job_path']}.job") if args["job_path"] else None)
        _stop_server(server, args["stop_grace_s"])

    record["exit"] = {**exit_status(server.wait()), "exited_at": time.time(), "reason": reason}
    current = read_pidfile(args["pidfile"])
    if current is not None and current["pid"] == record["pid"]:  # not removed or replaced since
        write_json_atomic(args["pidfile"], record)

    # What the server left in the group (workers it started) goes with it.
    if _others():
        os.killpg(os.getpid(), signal.SIGTERM)
        os.killpg(os.getpid(), signal.SIGCONT)
        wait_until(lambda: not _others(), args["stop_grace_s"], interval_s=0.1)
    if reason is not None:
        _release(args["lease_path"], args["run_id"])
    if _others():
        # Stragglers that outlived SIGTERM: SIGKILL the whole group, this process included (its
        # work is done; the lock was released a moment before their ends).
        os.killpg(os.getpid(), signal.SIGKILL)
