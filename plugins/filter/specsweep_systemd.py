"""Quoting for systemd unit files, so an argv element stays one word, verbatim."""

from __future__ import annotations

from typing import Any


def systemd_quote(word: Any, environment: bool = False) -> str:
    """One ExecStart argv element (or, with environment=True, an Environment= pair) quoted."""
    text = str(word)
    if any(c in text for c in "\n\r\0"):
        raise ValueError(f"systemd_quote: newline or NUL in {text!r}")
    # Backslash and quote are C-escaped and % starts a specifier everywhere;
    # $ expands variables in ExecStart= only.
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    if not environment:
        text = text.replace("$", "$$")
    return f'"{text}"'


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {"systemd_quote": systemd_quote}
