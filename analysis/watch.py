"""Following a job or a server on a host in slices: how many calls `until` may make, and which of
the server's records a call watches it by.

specsweep_job and specsweep_wait each follow the host for one slice and return, so that progress
is printed in between; they time out on their own. The roles that call them (benchmark,
wait_for_health) take these rules from here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def slice_retries(follow: Mapping[str, Any]) -> int:
    """The retries that cover `timeout_s` in calls of `slice_s` each, and one more: the module's
    own timeout, which names what it waited for, fails the task before the retries run out."""
    timeout, piece = float(follow["timeout_s"]), float(follow["slice_s"])
    if piece <= 0:
        raise ValueError(f"slice_retries: slice_s must be over 0, got {follow['slice_s']!r}")
    return math.ceil(timeout / piece) + 1


def server_pidfile(server: Mapping[str, Any]) -> str | None:
    """The pid record a call watches the server by: its supervisor's, under nohup; None under
    systemd (or no server), which the unit's own state covers."""
    return server.get("pidfile") if server.get("launcher") == "nohup" else None


def server_unit(server: Mapping[str, Any]) -> str | None:
    """The systemd unit a call watches the server by, under systemd; None under nohup."""
    return server.get("unit") if server.get("launcher") == "systemd" else None
