"""The benchmark client's interference sampler (roles/benchmark/files/specsweep_interference.py).

Parsers are fed real outputs: nvidia-smi's compute apps, /proc/cpuinfo and /proc/loadavg captured
on an H200 host (fixtures/interference/capture.sh, a CUDA context of 1.5 GiB held by pid 554), and
this machine's /proc/stat and /proc/net/tcp. The Watch runs over a /proc tree built in tmp_path,
and once over the real one (no nvidia-smi here: the GPU path degrades to no pids, no flag).
"""

from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import specsweep_interference as si

from analysis.facts.schema import Interference, from_dict

FIX = Path(__file__).resolve().parent / "fixtures" / "interference"
SOURCE = Path(si.__file__)
HZ = os.sysconf("SC_CLK_TCK")


def test_the_sampler_is_python_3_9_syntax() -> None:
    ast.parse(SOURCE.read_text(), feature_version=(3, 9))


def test_compute_apps_of_a_busy_and_an_idle_h200() -> None:
    assert si.parse_compute_apps((FIX / "apps-busy.csv").read_text()) == [554]
    assert si.parse_compute_apps((FIX / "apps-busy-nounits.csv").read_text()) == [554]
    assert si.parse_compute_apps((FIX / "apps-idle.csv").read_text()) == []
    # What an old driver prints instead of rows is not a pid.
    assert si.parse_compute_apps("[Not Supported], [Not Supported], [Not Supported]\n") == []


def test_cpu_frequency_from_cpufreq_else_cpuinfo() -> None:
    cpuinfo = (FIX / "cpuinfo-mhz.txt").read_text()
    assert si.parse_cpu_mhz([], cpuinfo) == pytest.approx(2100.0)
    assert si.parse_cpu_mhz(["3000000\n", "1000000\n"], cpuinfo) == pytest.approx(2000.0)
    assert si.parse_cpu_mhz([], "") is None


def test_load_average_and_machine_busy_time() -> None:
    assert si.parse_loadavg((FIX / "loadavg.txt").read_text()) == pytest.approx(0.08)
    assert si.parse_loadavg("") is None
    # cpu  167321 13 20302 44542 626 0 390 1867: user nice system (idle iowait out) irq softirq steal
    assert si.busy_jiffies((FIX / "proc-stat.txt").read_text()) == 167321 + 13 + 20302 + 0 + 390 + 1867


def test_a_process_stat_with_parentheses_and_spaces_in_its_name() -> None:
    line = "4242 (a) b (c) S 1 777 777 0 -1 4194304 0 0 0 0 150 25 0 0 20 0 1 0 1 1 1\n"
    assert si.parse_proc_stat(line) == (777, 175)
    assert si.parse_proc_stat("garbage") is None


def test_the_listening_socket_of_a_port() -> None:
    tcp = (FIX / "net-tcp.txt").read_text()
    assert si.listening_inodes(tcp, 8080) == {"40267"}  # 0100007F:1F90
    assert si.listening_inodes(tcp, 9999) == set()


@pytest.mark.parametrize(
    ("others", "ours", "cpus", "gpu", "flagged"),
    [
        (0.6, 1.8, 2, [], True),  # 2 cores, llama-server busy, a neighbour: the run waited for a core
        (0.3, 1.8, 2, [], False),  # under half a core: noise of the host's own daemons
        (3.0, 1.5, 16, [], False),  # a 16-core GPU host: the neighbour fitted in idle cores
        (15.0, 1.5, 16, [], True),  # ... unless it filled them
        (0.0, 1.0, 16, [901], True),  # any other compute context on the GPU
        (None, None, 2, [], False),  # nothing known: no verdict
    ],
)
def test_the_flag_rule(
    others: float | None, ours: float | None, cpus: int, gpu: list[int], flagged: bool
) -> None:
    got, reason = si.judge(others, ours, cpus, gpu)
    assert got is flagged
    assert (reason is not None) is flagged


class FakeProc:
    """A /proc tree: machine counters, one server (pgid 700) listening on 8080, one stranger."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "net").mkdir(parents=True)
        (root / "net" / "tcp").write_text((FIX / "net-tcp.txt").read_text())
        (root / "loadavg").write_text((FIX / "loadavg.txt").read_text())
        (root / "cpuinfo").write_text((FIX / "cpuinfo-mhz.txt").read_text())
        self.proc(554, pgid=700, jiffies=0, socket="40267")  # the server: the H200 capture's pid
        self.proc(os.getpid(), pgid=os.getpgrp(), jiffies=0)
        self.proc(901, pgid=901, jiffies=0)
        self.machine(0)

    def proc(self, pid: int, pgid: int, jiffies: int, socket: str | None = None) -> None:
        folder = self.root / str(pid)
        (folder / "fd").mkdir(parents=True, exist_ok=True)
        (folder / "stat").write_text(f"{pid} (x y) S 1 {pgid} {pgid} 0 -1 0 0 0 0 0 {jiffies} 0 0 0 20 0 1\n")
        if socket and not (folder / "fd" / "3").is_symlink():
            (folder / "fd" / "3").symlink_to(f"socket:[{socket}]")

    def machine(self, busy: int) -> None:
        (self.root / "stat").write_text(f"cpu  {busy} 0 0 1000 0 0 0 0 0 0\n")


def smi(stdout: str) -> Any:
    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        assert argv[1:] == si.GPU_QUERY
        return subprocess.CompletedProcess(argv, 0, stdout, "")

    return run


def watch(root: Path, stdout: str = "", nvidia_smi: str | None = "/usr/bin/nvidia-smi") -> si.Watch:
    ticks = iter([0.0, 10.0])
    return si.Watch(8080, proc=str(root), nvidia_smi=nvidia_smi, run=smi(stdout), clock=lambda: next(ticks))


def test_the_servers_gpu_context_is_ours_a_strangers_is_flagged(tmp_path: Path) -> None:
    FakeProc(tmp_path)
    mine = watch(tmp_path, (FIX / "apps-busy.csv").read_text())
    mine.begin()
    quiet = from_dict(Interference, mine.end())
    assert (quiet.gpu_other_pids, quiet.flagged) == ([], False)
    assert (quiet.load_avg_1m, quiet.cpu_mhz) == (0.08, 2100.0)
    other = watch(tmp_path, (FIX / "apps-busy.csv").read_text() + "901, python3, 800 MiB\n")
    other.begin()
    loud = from_dict(Interference, other.end())
    assert loud.gpu_other_pids == [901] and loud.flagged
    assert loud.reason == "other process(es) on the GPU: pid 901"


def test_busy_cores_not_explained_by_the_server_and_client_are_flagged(tmp_path: Path) -> None:
    fake = FakeProc(tmp_path)
    cpus = os.cpu_count() or 1
    w = watch(tmp_path, nvidia_smi=None)
    w.begin()
    # Over 10 s the server used 1 core; the machine was busy on every core.
    fake.proc(554, pgid=700, jiffies=10 * HZ)
    fake.machine(10 * HZ * cpus)
    got = from_dict(Interference, w.end())
    assert got.cpu_other_cores == pytest.approx(cpus - 1, abs=0.01)
    assert got.flagged is (cpus - 1 >= si.MIN_OTHER_CORES)
    assert got.gpu_other_pids == []


def test_without_the_server_nothing_is_told_ours_or_flagged(tmp_path: Path) -> None:
    FakeProc(tmp_path)
    w = si.Watch(9999, proc=str(tmp_path), nvidia_smi="/x", run=smi("901, python3, 1 MiB\n"))
    w.begin()
    got = from_dict(Interference, w.end())
    assert (got.gpu_other_pids, got.cpu_other_cores, got.flagged) == ([], None, False)


def test_on_this_host_without_nvidia_smi_a_run_is_sampled_and_fits_the_schema() -> None:
    w = si.Watch.for_port(1)  # nothing listens on port 1: no server known
    w.nvidia_smi = None  # as on CI, whatever this machine has
    w.begin()
    got = from_dict(Interference, w.end())
    assert got.load_avg_1m is not None and got.load_avg_1m >= 0
    assert got.gpu_other_pids == [] and not got.flagged
