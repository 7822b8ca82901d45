"""Run reasoning-gym's own gsm_symbolic generators, and nothing else of the package, in a child process.

Usage: python gsm_run.py WHEEL SEED SIZE -> a JSON list of {"question", "answer", "task"} on stdout.
The generators import only `reasoning_gym.utils` (stdlib); importing the package itself would pull its
heavy dependencies, so the three modules are unpacked alone into a throwaway package. A child process
keeps that package out of the controller's own imports.
"""

from __future__ import annotations

import ast
import json
import sys
import tempfile
import zipfile
from pathlib import Path
from random import Random

BASE = "reasoning_gym/arithmetic/gsm_symbolic/"
MODULES = {"reasoning_gym/utils.py": "utils.py", f"{BASE}generators_00_49.py": "g0.py",
           f"{BASE}generators_50_99.py": "g1.py"}  # fmt: skip
# The dataset appends this to every question (GSMSymbolicDataset.__getitem__).
SUFFIX = " Give the result as your final answer. Do not include units."


def tasks_ok(source: str) -> list[int]:
    """The generator numbers the package marks usable (its `tasks_ok` list), read without importing it."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "tasks_ok":
            return list(ast.literal_eval(node.value))
    raise SystemExit("gsm_symbolic.py has no tasks_ok list")


def generate(wheel: str, seed: int, size: int) -> list[dict]:
    """`size` problems as GSMSymbolicDataset(seed, size)[i] makes them, difficulty 1.0."""
    with zipfile.ZipFile(wheel) as whl, tempfile.TemporaryDirectory() as tmp:
        package = Path(tmp, "reasoning_gym")
        package.mkdir()
        (package / "__init__.py").write_text("")
        for member, name in MODULES.items():
            (package / name).write_bytes(whl.read(member))
        ok = tasks_ok(whl.read(f"{BASE}gsm_symbolic.py").decode())
        sys.path.insert(0, tmp)
        from reasoning_gym import g0, g1  # the package's own generators

        named = [(n, getattr(m, n)) for m in (g0, g1) for n in dir(m) if n.startswith("generate_")]
        generators = {int(n[9:]): fn for n, fn in named}
        picks = Random(seed).choices(ok, k=size)
        out = []
        for idx, task in enumerate(picks):
            example = generators[task](Random(seed + idx), 1.0)
            question, answer = example["question"] + SUFFIX, str(example["answer"])
            out.append({"question": question, "answer": answer, "task": task})
        return out


if __name__ == "__main__":
    print(json.dumps(generate(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))))
