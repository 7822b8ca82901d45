"""Import a plugin file (filter, module_utils, ...) by its path: plugins/ has no packages."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load_plugin(relpath: str) -> ModuleType:
    """The module at REPO/relpath, imported once per session (no Ansible needed)."""
    path = REPO / relpath
    name = "specsweep_test_" + relpath.removesuffix(".py").replace("/", "_").replace("-", "_")
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, f"cannot import {path}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
