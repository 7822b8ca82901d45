#!/usr/bin/python
"""Describe the host a measurement ran on: CPU, memory, kernel and, when present, NVIDIA GPUs."""

from __future__ import annotations

DOCUMENTATION = r"""
module: specsweep_host_facts
short_description: CPU, memory and NVIDIA GPU facts for result provenance
description:
  - Reads /proc and, when C(nvidia-smi) is on PATH, the GPU model, count, memory, driver, CUDA
    version and topology. Without nvidia-smi the GPU fields are empty; nothing fails.
options: {}
author: specsweep
"""

import os
import platform
import shutil
import socket
import subprocess

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.specsweep_gpu import parse_gpu_query, parse_smi_header


def cpu_model() -> str | None:
    """The CPU model name from /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def mem_total_mib() -> int | None:
    """MemTotal from /proc/meminfo, in MiB."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return None


def smi(*args: str) -> str | None:
    """Output of nvidia-smi with these arguments, or None when it is absent or fails."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60, check=False)
    return proc.stdout if proc.returncode == 0 else None


def main() -> None:
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    facts = {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "mem_total_mib": mem_total_mib(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "gpus": [],
        "gpu_driver": None,
        "cuda_version": None,
        "gpu_topology": None,
    }
    query = smi("--query-gpu=index,name,memory.total,uuid", "--format=csv,noheader,nounits")
    if query is not None:
        facts["gpus"] = parse_gpu_query(query)
        facts.update(parse_smi_header(smi() or ""))
        facts["gpu_topology"] = smi("topo", "-m")
    module.exit_json(changed=False, host_facts=facts)


if __name__ == "__main__":
    main()
