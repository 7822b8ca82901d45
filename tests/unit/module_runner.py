"""Run one of plugins/modules as Ansible would on a host, without a play: a fresh Python process
that reads its arguments, with plugins/module_utils served as ansible.module_utils."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]
# The module runs as __main__ (its AnsibleModule reads the arguments from argv in the debug
# protocol); the suite's module_utils join the package the modules import them from.
RUNNER = (
    "import runpy, sys\n"
    "import ansible.module_utils as mu\n"
    "mu.__path__.append(sys.argv[1])\n"
    "sys.argv = sys.argv[2:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def run_module(name: str, args: dict[str, Any], timeout_s: float = 120) -> dict[str, Any]:
    """The result of module `name` called with `args` (its JSON, `failed` set on failure)."""
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, str(REPO / "plugins" / "module_utils"),
         str(REPO / "plugins" / "modules" / f"{name}.py"), json.dumps({"ANSIBLE_MODULE_ARGS": args})],
        capture_output=True, text=True, timeout=timeout_s, check=False,
    )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"{name} printed no result (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return json.loads(lines[-1])


def module_utils(name: str) -> ModuleType:
    """plugins/module_utils/`name`.py imported as ansible.module_utils.`name`, as a module sees it
    (its imports of the others resolve the same way)."""
    import ansible.module_utils as mu

    folder = str(REPO / "plugins" / "module_utils")
    if folder not in mu.__path__:
        mu.__path__.append(folder)
    return importlib.import_module(f"ansible.module_utils.{name}")
