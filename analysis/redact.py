"""Secrets out of what is written: the launch argv and env in facts, plans and sweep locks.

Below both analysis.sweep (the plan and the lock record redacted launches) and analysis.facts (the
fact does), so neither imports the other for it.
"""

from __future__ import annotations

import re

# Env/argv values whose name matches this are secrets: never written to disk.
SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|CREDENTIAL)", re.IGNORECASE)
SECRET_FLAGS = frozenset({"--api-key", "--admin-api-key"})
REDACTED = "<redacted>"


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """Environment with secret-looking values replaced."""
    return {k: (REDACTED if SECRET_NAME.search(k) else v) for k, v in env.items()}


def redact_argv(argv: list[str]) -> list[str]:
    """argv with the value after a secret flag (or inside --flag=value) replaced."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        flag = arg.split("=", 1)[0]
        if hide_next:
            out.append(REDACTED)
        elif flag in SECRET_FLAGS and "=" in arg:
            out.append(f"{flag}={REDACTED}")
        else:
            out.append(arg)
        hide_next = arg in SECRET_FLAGS
    return out
