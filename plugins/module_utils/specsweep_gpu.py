"""Parsers for nvidia-smi output (stdlib only; fixtures from a real H200 in tests)."""

from __future__ import annotations

import re


def parse_gpu_query(text: str) -> list[dict]:
    """Rows of `--query-gpu=index,name,memory.total,uuid --format=csv,noheader,nounits`."""
    gpus = []
    for line in text.strip().splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 4 or not fields[0].isdigit():
            continue
        memory = fields[2] if fields[2].isdigit() else None
        gpus.append(
            {
                "index": int(fields[0]),
                "name": fields[1],
                "memory_total_mib": memory and int(memory),
                "uuid": fields[3],
            }
        )
    return gpus


# nvidia-smi underlines the header of `topo -m` with ANSI escape codes, even into a pipe.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def plain_text(text: str) -> str:
    """`text` without ANSI escape sequences (SGR colours, cursor moves)."""
    return _ANSI.sub("", text)


def parse_smi_header(text: str) -> dict:
    """Driver and CUDA versions from plain `nvidia-smi` output's banner."""
    # A version starts with a digit and stays on its line: "N/A" or an empty field gives None.
    driver = re.search(r"Driver Version:[ \t]*(\d[\w.]*)", text)
    cuda = re.search(r"CUDA Version:[ \t]*(\d[\w.]*)", text)
    return {"gpu_driver": driver and driver[1], "cuda_version": cuda and cuda[1]}
