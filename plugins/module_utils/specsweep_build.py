"""An engine binary's own build info, from its `--version` output (stdlib only)."""

from __future__ import annotations

import re

# llama.cpp's common/build-info.cpp.in: "version: 0.6.0-dev (build 0, commit unknown)" (newer) or
# "version: 6123 (a1b2c3d)" (older), then "built with GNU 13.3.0 for Linux x86_64"; a CUDA build
# may print its device lines first.
_NEW = re.compile(r"^version: (\S+) \(build (\d+), commit (\S+)\)\s*$", re.MULTILINE)
_OLD = re.compile(r"^version: (\d+) \((\S+)\)\s*$", re.MULTILINE)
_BUILT = re.compile(r"^built with (.+?)\s*$", re.MULTILINE)


def llama_build(text: str) -> str | None:
    """`llama.cpp 0.6.0-dev b0-unknown (built with GNU 13.3.0 for Linux x86_64)` from llama-server
    --version's output: the version, llama.cpp's own b<build>-<commit> tag as /props' build_info
    spells it, and the compiler; None when the output has no version line."""
    new, old = _NEW.search(text), _OLD.search(text)
    if new:
        words = f"llama.cpp {new[1]} b{new[2]}-{new[3]}"
    elif old:
        words = f"llama.cpp b{old[1]}-{old[2]}"
    else:
        return None
    built = _BUILT.search(text)
    return f"{words} (built with {built[1]})" if built else words
