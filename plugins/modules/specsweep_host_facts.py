#!/usr/bin/python
"""Describe a host for the sweep in one round trip: its hardware, and what it has of an engine."""

from __future__ import annotations

DOCUMENTATION = r"""
module: specsweep_host_facts
short_description: CPU, memory and NVIDIA GPU facts, and a read-only check of an engine's install
description:
  - Reads /proc and, when C(nvidia-smi) is on PATH, the GPU model, count, memory, driver, CUDA
    version and topology. Without nvidia-smi the GPU fields are empty; nothing fails.
  - Reports what of an engine is missing or different, and changes nothing. Roles run their
    install tasks only for what it reports, so a host that is up to date costs this one call.
  - O(packages) and O(imports) are checked with O(python) (for example the engine's venv), never
    with the Python that runs this module.
  - O(models) are checked without reading their weights (module_utils/specsweep_models.py). A GGUF file
    must hold its whole header and every tensor that header places; a checkpoint folder needs a
    config.json that parses and complete safetensors files (those its index names, else those present).
    A Hugging Face repo id (no leading /) is not checked.
  - C(problems) says, one sentence each naming the host O(label), what stops a launch on the host as
    found - import errors, missing paths, missing or corrupt models (not missing pins or stale files,
    which the roles install). A role that installs or writes something re-checks afterwards.
options:
  hardware: {type: bool, default: true, description: Describe CPU, memory and GPUs (C(host_facts)).}
  python: {type: str, description: Interpreter whose packages and imports are checked.}
  packages:
    type: list
    elements: str
    default: []
    description: Pins (C(name==version)) that O(python) must have installed.
  imports:
    type: list
    elements: str
    default: []
    description: Modules O(python) must import; their C(__version__) is returned.
  files:
    type: dict
    default: {}
    description: Host path to the SHA-1 of the content it must have.
  paths:
    type: list
    elements: path
    default: []
    description: Paths that must exist.
  models:
    type: list
    elements: dict
    default: []
    description:
      - Models to check, each C({path, format}); C(format) is C(gguf) or C(hf) (a checkpoint folder),
        by default C(hf) for a folder and C(gguf) for a file.
  label: {type: str, description: The host's name in C(problems) (inventory hostname); default its hostname.}
  version_argv:
    type: list
    elements: str
    description:
      - A llama-server binary's command with C(--version); its own build info is returned as C(engine_build).
author: specsweep
"""

RETURN = r"""
host_facts: {type: dict, returned: with O(hardware), description: CPU, memory, kernel, Python and GPUs.}
installed:
  type: dict
  returned: always
  description:
    - C(python_ok) (O(python) runs; true without it), C(missing_packages) (all pins when it does not run),
      C(imports) (module to version), C(import_errors) (module to the last line of its error),
      C(stale_files) (absent or different O(files)), C(missing_paths) (O(paths) and O(models)),
      C(models) (path to C(status) - ok, not_checked, model_not_found or model_corrupt - and C(problem)),
      and C(complete) (none of these, and no corrupt model).
problems:
  type: list
  returned: always
  description:
    - A sentence per import error, missing path, bad model; a model's begins with its cause (model_corrupt).
engine_build:
  type: str
  returned: with O(version_argv)
  description: The build info it printed; null when none.
model_identity:
  type: list
  returned: always
  description:
    - Per O(models) entry C({path, bytes, mtime, digest}); C(digest) is the sha256 of the GGUF header (all
      before the tensor data) or of config.json. Null values for a model not found, corrupt or not checked.
"""

import hashlib
import json
import os
import platform
import shutil
import socket
import subprocess

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.specsweep_build import llama_build
from ansible.module_utils.specsweep_gpu import parse_gpu_query, parse_smi_header, plain_text
from ansible.module_utils.specsweep_models import check_model


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


# Runs under the checked interpreter (-I: its own site-packages only, not ours or the user's).
PROBE = r"""
import importlib, json, re, sys
from importlib.metadata import distributions
pins, imports = json.loads(sys.argv[1])
norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()
have = {norm(d.metadata["Name"]) + "==" + d.version for d in distributions()}
found, errors = {}, {}
for name in imports:
    try:
        found[name] = getattr(importlib.import_module(name), "__version__", None)
    except Exception as exc:
        errors[name] = (type(exc).__name__ + ": " + str(exc)).strip().splitlines()[-1]
missing = [p for p in pins if norm(p.split("==")[0]) + "==" + p.split("==", 1)[-1] not in have]
print(json.dumps({"missing": missing, "imports": found, "import_errors": errors}))
"""


def sha1(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha1(f.read()).hexdigest()
    except OSError:
        return None


def probe(python: str, packages: list[str], imports: list[str]) -> dict:
    """Ask `python` which pins it lacks and which modules it imports; a Python that does not run
    lacks every pin and imports nothing."""
    try:
        proc = subprocess.run(
            [python, "-I", "-c", PROBE, json.dumps([packages, imports])],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        if proc.returncode == 0:
            return {"python_ok": True, **json.loads(proc.stdout)}
        reason = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        reason = str(exc)
    errors = dict.fromkeys(imports, reason)
    return {"python_ok": False, "missing": packages, "imports": {}, "import_errors": errors}


def hardware() -> dict:
    """The host_facts every measurement records."""
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
        topology = smi("topo", "-m")
        facts["gpu_topology"] = topology and plain_text(topology)
    return facts


def installed(p: dict) -> dict:
    """What of the engine in `p` is missing or stale on this host."""
    found = probe(p["python"], p["packages"], p["imports"]) if p["python"] else {}
    out = {
        "python_ok": found.get("python_ok", True),
        "missing_packages": found.get("missing", []),
        "imports": found.get("imports", {}),
        "import_errors": found.get("import_errors", {}),
        "stale_files": sorted(dest for dest, digest in p["files"].items() if sha1(dest) != digest),
        "missing_paths": [path for path in p["paths"] if not os.path.exists(path)],
    }
    out["complete"] = out["python_ok"] and not any(
        out[k] for k in ("missing_packages", "import_errors", "stale_files", "missing_paths")
    )
    return out


def add_models(out: dict, models: dict) -> dict:
    """`out` of installed() with the models as check_models found them: missing ones among the
    missing paths, each one's status and problem, and complete only when none is missing or corrupt."""
    missing = [path for path, m in models.items() if m["status"] == "model_not_found"]
    return {
        **out,
        "missing_paths": out["missing_paths"]
        + [path for path in missing if path not in out["missing_paths"]],
        "models": {path: {"status": m["status"], "problem": m["problem"]} for path, m in models.items()},
        "complete": out["complete"] and not any(m["problem"] for m in models.values()),
    }


def check_models(entries: list[dict], label: str) -> dict:
    """check_model of each entry by path, with its problem as a sentence (None when there is none)."""
    models = {}
    for entry in entries:
        found = check_model(entry["path"], entry.get("format"))
        problem = None
        # The cause word first: the output and preflight.json name it as a failed config's fact does.
        if found["status"] == "model_not_found":
            problem = f"model_not_found: model path {entry['path']} does not exist on {label}"
        elif found["corrupt"] is not None:
            problem = f"model_corrupt: {found['corrupt'].subject} on {label} {found['corrupt'].detail}"
        models[entry["path"]] = {**found, "problem": problem}
    return models


def problems(p: dict, out: dict, models: dict, label: str) -> list[str]:
    """What stops a launch: import errors, missing paths and bad models, one sentence each."""
    sentences = [
        f"{p['python']} cannot import {name} on {label}: {error}"
        for name, error in out["import_errors"].items()
    ]
    sentences += [
        f"path {path} does not exist on {label}" for path in out["missing_paths"] if path not in models
    ]
    return sentences + [m["problem"] for m in models.values() if m["problem"]]


ARGUMENT_SPEC = {
    "hardware": {"type": "bool", "default": True},
    "python": {"type": "str"},
    "packages": {"type": "list", "elements": "str", "default": []},
    "imports": {"type": "list", "elements": "str", "default": []},
    "files": {"type": "dict", "default": {}},
    "paths": {"type": "list", "elements": "path", "default": []},
    "models": {
        "type": "list",
        "elements": "dict",
        "default": [],
        "options": {
            "path": {"type": "str", "required": True},
            "format": {"type": "str", "choices": ["gguf", "hf"]},
        },
    },
    "label": {"type": "str"},
    "version_argv": {"type": "list", "elements": "str"},
}


def engine_build(argv: list[str]) -> str | None:
    """The build info a binary prints with --version (llama.cpp writes it to stderr)."""
    try:
        # Bounded: a command that ignores --version and serves must not hold the preflight.
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return llama_build(proc.stdout + proc.stderr)


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    p = module.params
    if (p["packages"] or p["imports"]) and not p["python"]:
        module.fail_json(msg="packages and imports need python: the interpreter to check them with")
    bad = [pin for pin in p["packages"] if "==" not in pin]
    if bad:
        module.fail_json(msg=f"packages must be pins name==version: {', '.join(bad)}")
    label = p["label"] or socket.gethostname()
    models = check_models(p["models"], label)
    out = add_models(installed(p), models)
    result = {
        "installed": out,
        "problems": problems(p, out, models, label),
        "model_identity": [models[entry["path"]]["identity"] for entry in p["models"]],
    }
    if p["hardware"]:
        result["host_facts"] = hardware()
    if p["version_argv"]:
        result["engine_build"] = engine_build(p["version_argv"])
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
