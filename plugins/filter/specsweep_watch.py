"""Following a host in slices, as filters (analysis.watch owns the rules):
`retries: "{{ benchmark_slices | specsweep_slice_retries }}"` with
benchmark_slices = {timeout_s, slice_s}."""

from __future__ import annotations

from typing import Any

# The suite's own Python (installed in the venv by scripts/setup.sh).
from analysis.watch import server_pidfile, server_unit, slice_retries


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "specsweep_slice_retries": slice_retries,
            "specsweep_server_pidfile": server_pidfile,
            "specsweep_server_unit": server_unit,
        }
