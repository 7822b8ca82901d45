"""The nvidia-smi parsers (plugins/module_utils/specsweep_gpu.py) and the host-facts module's GPU path.

fixtures/h200/ holds real output of a 2 x NVIDIA H200 machine (driver 580.159.04, CUDA 13.0,
Firecracker kernel 6.18.44), recorded 2026-11-30 with the exact calls specsweep_host_facts makes;
only the GPU UUIDs were replaced with same-shape fakes:

    nvidia-smi --query-gpu=index,name,memory.total,uuid --format=csv,noheader,nounits
                                                        > query_gpu_noheader_nounits.csv
    nvidia-smi                                          > nvidia_smi.txt
    nvidia-smi topo -m                                  > nvidia_smi_topo_m.txt  (ANSI codes kept)
    nvidia-smi --query-gpu=index,name,memory.total,uuid,driver_version,pci.bus_id --format=csv
                                                        > query_gpu_with_header.csv  (reference)
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
H200 = Path(__file__).resolve().parent / "fixtures" / "h200"
GPU_MODULE_NAME = "ansible.module_utils.specsweep_gpu"
QUERY_ARGS = ("--query-gpu=index,name,memory.total,uuid", "--format=csv,noheader,nounits")

H200_GPUS = [
    {
        "index": 0,
        "name": "NVIDIA H200",
        "memory_total_mib": 143771,
        "uuid": "GPU-00000000-1111-2222-3333-000000000000",
    },
    {
        "index": 1,
        "name": "NVIDIA H200",
        "memory_total_mib": 143771,
        "uuid": "GPU-00000000-1111-2222-3333-000000000001",
    },
]


def _load(name: str, path: Path) -> ModuleType:
    """Import a file by path under `name` (plugins/ is no package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpu = _load("specsweep_gpu_under_test", REPO / "plugins" / "module_utils" / "specsweep_gpu.py")
build = _load("specsweep_build_under_test", REPO / "plugins" / "module_utils" / "specsweep_build.py")


def fixture(name: str) -> str:
    return (H200 / name).read_text(encoding="utf-8")


@pytest.fixture
def host_facts(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """specsweep_host_facts.py, its `ansible.module_utils.specsweep_gpu` import served by path."""
    monkeypatch.setitem(sys.modules, GPU_MODULE_NAME, gpu)
    monkeypatch.setitem(sys.modules, "ansible.module_utils.specsweep_build", build)
    return _load("specsweep_host_facts_under_test", REPO / "plugins" / "modules" / "specsweep_host_facts.py")


def fake_smi(directory: Path, rc: int = 0) -> None:
    """An `nvidia-smi` in `directory` that prints the H200 fixtures for the module's three calls."""
    q = " ".join(QUERY_ARGS)
    script = f"""#!/bin/sh
[ {rc} -eq 0 ] || {{ echo "NVIDIA-SMI has failed: no driver"; exit {rc}; }}
case "$*" in
  "{q}") exec cat "{H200 / "query_gpu_noheader_nounits.csv"}" ;;
  "") exec cat "{H200 / "nvidia_smi.txt"}" ;;
  "topo -m") exec cat "{H200 / "nvidia_smi_topo_m.txt"}" ;;
  *) echo "unexpected arguments: $*" >&2; exit 2 ;;
esac
"""
    exe = directory / "nvidia-smi"
    exe.write_text(script, encoding="utf-8")
    exe.chmod(0o755)


# --- parse_gpu_query ---------------------------------------------------------------------


def test_parse_gpu_query_real_h200_output() -> None:
    assert gpu.parse_gpu_query(fixture("query_gpu_noheader_nounits.csv")) == H200_GPUS


def test_parse_gpu_query_agrees_with_the_csv_with_header_and_units() -> None:
    rows = [line.split(", ") for line in fixture("query_gpu_with_header.csv").splitlines()]
    header, body = rows[0], rows[1:]
    assert header[:4] == ["index", "name", "memory.total [MiB]", "uuid"]
    parsed = gpu.parse_gpu_query(fixture("query_gpu_noheader_nounits.csv"))
    assert len(body) == len(parsed) == 2
    for row, g in zip(body, parsed, strict=True):
        assert [int(row[0]), row[1], row[2], row[3]] == [
            g["index"],
            g["name"],
            f"{g['memory_total_mib']} MiB",
            g["uuid"],
        ]


def test_parse_gpu_query_types() -> None:
    for g in gpu.parse_gpu_query(fixture("query_gpu_noheader_nounits.csv")):
        assert type(g["index"]) is int
        assert type(g["memory_total_mib"]) is int


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n",
        "No devices were found\n",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n",
        "index, name, memory.total [MiB], uuid\n",
        "0, NVIDIA H200\n",
        "x, NVIDIA H200, 143771, GPU-00000000-1111-2222-3333-000000000000\n",
    ],
)
def test_parse_gpu_query_empty_or_garbage(text: str) -> None:
    assert gpu.parse_gpu_query(text) == []


def test_parse_gpu_query_skips_garbage_lines_between_rows() -> None:
    text = "Warning: something\n" + fixture("query_gpu_noheader_nounits.csv") + "trailing junk\n"
    assert gpu.parse_gpu_query(text) == H200_GPUS


def test_parse_gpu_query_memory_not_available() -> None:
    text = "0, NVIDIA H200, [N/A], GPU-00000000-1111-2222-3333-000000000000\n"
    assert gpu.parse_gpu_query(text) == [
        {
            "index": 0,
            "name": "NVIDIA H200",
            "memory_total_mib": None,
            "uuid": "GPU-00000000-1111-2222-3333-000000000000",
        }
    ]


# --- parse_smi_header --------------------------------------------------------------------


def test_parse_smi_header_real_h200_output() -> None:
    assert gpu.parse_smi_header(fixture("nvidia_smi.txt")) == {
        "gpu_driver": "580.159.04",
        "cuda_version": "13.0",
    }


def test_parse_smi_header_driver_matches_query_column() -> None:
    body = fixture("query_gpu_with_header.csv").splitlines()[1:]
    drivers = {line.split(", ")[4] for line in body}
    assert drivers == {gpu.parse_smi_header(fixture("nvidia_smi.txt"))["gpu_driver"]}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage\n",
        "No devices were found\n",
        "Driver Version:\nCUDA Version:   \n",
        "| NVIDIA-SMI 580.159.04   Driver Version: N/A   CUDA Version: N/A   |\n",
    ],
)
def test_parse_smi_header_empty_or_garbage(text: str) -> None:
    assert gpu.parse_smi_header(text) == {"gpu_driver": None, "cuda_version": None}


# --- specsweep_host_facts ----------------------------------------------------------------


def test_smi_without_nvidia_smi_on_path(
    host_facts: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert host_facts.smi() is None
    assert host_facts.smi(*QUERY_ARGS) is None


def test_smi_failing_nvidia_smi(
    host_facts: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_smi(tmp_path, rc=9)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert host_facts.smi(*QUERY_ARGS) is None


def test_smi_returns_stdout(host_facts: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_smi(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert host_facts.smi("topo", "-m") == fixture("nvidia_smi_topo_m.txt")
    assert host_facts.smi("--bogus") is None


class _ExitJson(Exception):
    pass


def run_main(host_facts: ModuleType, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Run main() with AnsibleModule replaced; return the host_facts it exits with."""
    result: dict[str, Any] = {}

    class FakeModule:
        def __init__(self, **kwargs: Any) -> None:
            assert kwargs == {"argument_spec": host_facts.ARGUMENT_SPEC, "supports_check_mode": True}
            self.params = {k: spec.get("default") for k, spec in host_facts.ARGUMENT_SPEC.items()}

        def exit_json(self, **kwargs: Any) -> None:
            result.update(kwargs)
            raise _ExitJson

    monkeypatch.setattr(host_facts, "AnsibleModule", FakeModule)
    with pytest.raises(_ExitJson):
        host_facts.main()
    assert result["changed"] is False
    return result["host_facts"]


def test_main_with_h200_nvidia_smi(
    host_facts: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_smi(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    facts = run_main(host_facts, monkeypatch)
    assert facts["gpus"] == H200_GPUS
    assert facts["gpu_driver"] == "580.159.04"
    assert facts["cuda_version"] == "13.0"
    # As nvidia-smi printed it, less the ANSI codes that underline its header.
    assert facts["gpu_topology"] == fixture("nvidia_smi_topo_m.txt").replace("\x1b[4m", "").replace(
        "\x1b[0m", ""
    )
    assert facts["gpu_topology"].splitlines()[0] == "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"


def test_main_without_nvidia_smi(
    host_facts: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    facts = run_main(host_facts, monkeypatch)
    assert facts["gpus"] == []
    assert facts["gpu_driver"] is None
    assert facts["cuda_version"] is None
    assert facts["gpu_topology"] is None
    assert isinstance(facts["cpu_count"], int)


# --- the install check (the same round trip) -----------------------------------------------


def test_installed_reports_missing_pins_failed_imports_stale_files_and_paths(
    host_facts: ModuleType, tmp_path: Path
) -> None:
    good, stale = tmp_path / "launcher.py", tmp_path / "client.py"
    good.write_text("print('hi')\n")
    stale.write_text("old\n")
    digest = hashlib.sha1(b"print('hi')\n").hexdigest()
    pytest_pin = f"pytest=={importlib.metadata.version('pytest')}"
    p = {
        "python": sys.executable,
        "packages": [pytest_pin, "pytest==0.0.1", "no-such-dist==1.0"],
        "imports": ["pytest", "no_such_module_here"],
        "files": {str(good): digest, str(stale): digest, str(tmp_path / "absent.py"): digest},
        "paths": [str(tmp_path), str(tmp_path / "model.gguf")],
    }
    out = host_facts.installed(p)
    assert out["python_ok"] is True
    assert out["missing_packages"] == ["pytest==0.0.1", "no-such-dist==1.0"]
    assert out["imports"] == {"pytest": pytest.__version__}
    assert out["import_errors"] == {
        "no_such_module_here": "ModuleNotFoundError: No module named 'no_such_module_here'"
    }
    assert out["stale_files"] == sorted([str(stale), str(tmp_path / "absent.py")])
    assert out["missing_paths"] == [str(tmp_path / "model.gguf")]
    assert out["complete"] is False
    complete = host_facts.installed({**p, "packages": [pytest_pin], "imports": ["pytest"],
                                     "files": {str(good): digest}, "paths": [str(tmp_path)]})  # fmt: skip
    assert complete["complete"] is True


def test_installed_with_a_python_that_does_not_run_lacks_everything(
    host_facts: ModuleType, tmp_path: Path
) -> None:
    out = host_facts.installed({"python": str(tmp_path / "venv" / "bin" / "python"), "packages": ["a==1"],
                                "imports": ["sglang"], "files": {}, "paths": []})  # fmt: skip
    assert (out["python_ok"], out["missing_packages"], out["complete"]) == (False, ["a==1"], False)
    assert "No such file or directory" in out["import_errors"]["sglang"]
