"""A host waiting on the controller for another host renews its lease: when, and with what."""

from __future__ import annotations

from typing import Any

import pytest
from factories import host_plan

from analysis.sweep import lease

TASK_VARS = {
    "inventory_hostname": "gpu-a",
    "specsweep_plan": {
        "sweep": {"settings": {"lease_s": 30}},
        "hosts": {"gpu-a": host_plan(lock_path="/var/lib/specsweep/run/sweep.lock")},
        "owner": {"run_id": "r1", "sweep_id": "s"},
    },
}


def test_a_wait_renews_at_once_then_every_third_of_the_lease() -> None:
    due = [lease.renewal_due("gpu-a/t1", 30, now) for now in (100.0, 105.0, 109.9, 110.0, 115.0, 120.5)]
    assert due == [True, False, False, True, False, True]
    # Another poll (another task, or host) keeps its own time.
    assert lease.renewal_due("gpu-a/t2", 30, 105.0)


class Host:
    """Stands in for the action plugin's module call: records it and answers as the module would."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer, self.calls = answer, []

    def __call__(self, name: str, module_args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((name, module_args))
        return self.answer


def test_a_due_renewal_runs_the_lock_module_on_the_host_for_this_run() -> None:
    host = Host({"changed": False, "renewed": True})
    assert lease.keep_while_waiting(TASK_VARS, "task-1", host) is None
    assert host.calls == [
        ("specsweep_lock", {"state": "renewed", "path": "/var/lib/specsweep/run/sweep.lock",
                            "owner": {"run_id": "r1", "sweep_id": "s"}}),
    ]  # fmt: skip
    assert lease.keep_while_waiting(TASK_VARS, "task-1", host) is None
    assert len(host.calls) == 1, "not due again within a third of the lease"


@pytest.mark.parametrize(
    "answer", [{"renewed": False}, {"failed": True, "msg": "Permission denied"}], ids=["not ours", "failed"]
)
def test_a_host_whose_lock_is_lost_is_named(answer: dict[str, Any]) -> None:
    lost = lease.keep_while_waiting(TASK_VARS, f"lost-{len(answer)}", Host(answer))
    assert lost is not None
    assert lost.startswith("lost this host while waiting: /var/lib/specsweep/run/sweep.lock: ")
    assert answer.get("msg", "another run holds it") in lost
