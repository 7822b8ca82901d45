"""Where a sweep stands, from its facts on disk (analysis.running.progress): whether a host measures a
config now, the line an operator reads, and how far each host got."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from factories import config, entry, host_plan

from analysis.running import progress
from analysis.sweep import claims, order
from analysis.sweep.hostplan import HostPlan, Slot, load

SINCE = 1_000.0  # this run's start


def fact(
    sweep: Path, host: str, config_id: str, status: str = "ok", started: float = SINCE, took: float = 60
) -> None:
    path = sweep / host / f"{config_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    timings = {"started_at": started, "finished_at": started + took}
    path.write_text(json.dumps({"status": status, "timings": timings}))


def where(sweep: Path, host: str = "a", follows: str | None = None) -> dict[str, Any]:
    return {"dir": str(sweep), "run_id": "r1", "host": host, "follows": follows}


def start(sweep: Path, config_id: str, *, host: str = "a", shared: bool = False, **kw: Any) -> dict[str, Any]:
    return progress.start(where(sweep, host, kw.get("follows")), config_id, kw.get("index", 0),
                          kw.get("total", 3), shared, SINCE, kw.get("lost", ()),
                          kw.get("retake", False))  # fmt: skip


# --------------------------------------------------------------------------------------
# start
# --------------------------------------------------------------------------------------


def test_a_config_not_yet_measured_is_launched(tmp_path: Path) -> None:
    before = time.time()
    started = start(tmp_path, "s1")
    assert (started["measure"], started["specsweep_say"]) == (
        True,
        "config 1/3 s1: launching; 0 measured here (0 failed)",
    )
    assert before <= started["started_at"] <= time.time()


def test_a_config_this_host_measured_is_skipped_on_resume(tmp_path: Path) -> None:
    fact(tmp_path, "a", "s1", started=0.0)  # an earlier run's
    skipped = start(tmp_path, "s1", index=1)
    assert (skipped["measure"], skipped["specsweep_say"]) == (
        False, "config 2/3 s1: measured already, skipped; 0 measured here (0 failed)",
    )  # fmt: skip
    # Another host's fact does not count in replicate mode; a failed one is measured again.
    assert start(tmp_path, "s1", host="b")["measure"] is True
    fact(tmp_path, "a", "s2", status="failed", started=0.0)
    assert start(tmp_path, "s2")["measure"] is True


def test_a_follower_skips_what_its_leader_measured(tmp_path: Path) -> None:
    fact(tmp_path, "lead", "s1", started=0.0)
    assert start(tmp_path, "s1", host="b", follows="lead")["measure"] is False
    assert start(tmp_path, "s2", host="b", follows="lead")["measure"] is True
    # The leader recorded s3 in this run before the follower got to it: the follower still runs its part.
    fact(tmp_path, "lead", "s3", started=SINCE + 1)
    assert start(tmp_path, "s3", host="b", follows="lead")["measure"] is True
    assert start(tmp_path, "s3", host="lead")["measure"] is False


def test_in_shard_mode_the_first_host_to_claim_a_config_measures_it(tmp_path: Path) -> None:
    won = start(tmp_path, "s1", host="a", shared=True)
    lost = start(tmp_path, "s1", host="b", shared=True)
    assert won["measure"] is True
    assert (lost["measure"], lost["specsweep_say"]) == (
        False, "config 1/3 s1: taken by another host; 0 measured here (0 failed)",
    )  # fmt: skip
    assert (tmp_path / ".claims" / "r1" / "s1").is_dir()
    # A later run claims afresh; a config any host measured is not claimed at all.
    fact(tmp_path, "b", "s2", started=0.0)
    assert start(tmp_path, "s2", host="a", shared=True)["measure"] is False
    assert not (tmp_path / ".claims" / "r1" / "s2").exists()


def test_the_progress_line_counts_this_runs_facts_and_estimates_what_is_left(tmp_path: Path) -> None:
    fact(tmp_path, "a", "baseline", took=60)
    fact(tmp_path, "a", "s1", took=100)
    fact(tmp_path, "a", "old", started=SINCE - 500, took=900)  # an earlier run's: not counted
    fact(tmp_path, "b", "s1", took=900)  # another host's: not counted
    said = start(tmp_path, "s2", index=2, total=5)["specsweep_say"]
    # 2 done, 80 s each on average; 3 left (this one included): 4 minutes.
    assert said == "config 3/5 s2: launching; 2 measured here (0 failed); ETA 4 min"


def test_failed_configs_are_counted_apart_and_no_eta_is_given_for_a_skip(tmp_path: Path) -> None:
    fact(tmp_path, "a", "baseline", took=60)
    fact(tmp_path, "a", "s1", status="failed", took=30)
    fact(tmp_path, "a", "s2", started=0.0)
    said = start(tmp_path, "s2", index=2, total=4)["specsweep_say"]
    assert said == "config 3/4 s2: measured already, skipped; 2 measured here (1 failed)"


def test_an_unreadable_fact_neither_counts_nor_stops_the_line(tmp_path: Path) -> None:
    fact(tmp_path, "a", "baseline", took=120)
    (tmp_path / "a" / "s1.json").write_text('{"status": "ok", "timings": {"started_at": ')
    (tmp_path / "a" / "s2.json").write_text('{"status": "ok"}')
    assert start(tmp_path, "s1", index=1, total=2)["specsweep_say"] == (
        "config 2/2 s1: launching; 1 measured here (0 failed); ETA 2 min"
    )


# --------------------------------------------------------------------------------------
# host_state, failed_configs
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("registered", "state"),
    [
        ({}, "not reached"),
        ({"specsweep_lock": {"unreachable": True}}, "not reached"),
        ({"specsweep_lock": {"refusal": "in use", "holder": {"sweep_id": "n1", "run_id": "r0"}}},
         "in use by sweep n1 (run r0)"),
        ({"specsweep_lock": {"refusal": "in use"}}, "in use by sweep ? (run ?)"),
        ({"specsweep_lock": {"acquired": True}}, "stopped in preflight"),
        ({"specsweep_lock": {"acquired": True}, "specsweep_preflight": {"problems": ["no GPU", "no sglang"]}},
         "stopped in preflight: no GPU; no sglang"),
        ({"specsweep_lock": {"acquired": True}, "specsweep_start": {"measure": True}}, "lost mid-sweep"),
        ({"specsweep_lock": {"acquired": True}, "specsweep_start": {}, "specsweep_released": {}}, "finished"),
    ],
)  # fmt: skip
def test_host_state_reads_how_far_a_host_got_from_what_its_tasks_registered(
    registered: dict[str, Any], state: str
) -> None:
    assert progress.host_state(registered) == state


def test_failed_configs_lists_every_failed_fact_of_the_sweeps_hosts(tmp_path: Path) -> None:
    fact(tmp_path, "a", "s1", status="failed")
    fact(tmp_path, "a", "s2")
    fact(tmp_path, "b", "baseline", status="failed")
    fact(tmp_path, "other", "s1", status="failed")  # not one of the sweep's hosts
    (tmp_path / "a" / "s3.json").write_text("{")
    assert progress.failed_configs(tmp_path, ["b", "a", "c"]) == ["a/s1", "b/baseline"]


def test_a_claim_is_won_once_and_names_its_host(tmp_path: Path) -> None:
    root = tmp_path / ".claims" / "r1"
    won = [claims.take(root / c, {"host": h}) for c, h in (("s1", "a"), ("s1", "b"), ("s2", "b"))]
    assert won == [True, False, True]
    assert (claims.owner(root / "s1"), claims.owner(root / "s2")) == ("a", "b")
    assert claims.take(root / "s1", {"host": "a"}) is True  # its own claim, asked again


def test_a_lost_hosts_claim_is_taken_over_once(tmp_path: Path) -> None:
    root = tmp_path / ".claims" / "r1"
    assert claims.take(root / "s3", {"host": "b"})
    assert claims.take(root / "s3", {"host": "a"}) is False  # b is alive: its claim stands
    assert claims.take(root / "s3", {"host": "a"}, lost={"b"}) is True
    assert claims.owner(root / "s3") == "a"
    assert claims.take(root / "s3", {"host": "c"}, lost={"b"}) is False  # a holds it now, and a is alive
    assert [p.name.split("-")[0] for p in root.glob(".s3.lost-*")] == [".s3.lost"]  # kept, not deleted


def test_a_claim_being_written_is_not_taken_over(tmp_path: Path) -> None:
    (tmp_path / "s1").mkdir()  # mkdir done, note not written yet: its host is unknown, not lost
    assert claims.take(tmp_path / "s1", {"host": "a"}, lost={"b"}) is False


def test_shard_start_takes_over_a_lost_hosts_config_and_the_last_pass_waits_for_live_ones(
    tmp_path: Path,
) -> None:
    assert start(tmp_path, "s1", host="b", shared=True)["measure"] is True  # b claims s1, then is lost
    assert start(tmp_path, "s2", host="c", shared=True)["measure"] is True  # c claims s2, still running
    took = start(tmp_path, "s1", host="a", shared=True, lost={"b"}, retake=True, index=1)
    assert (took["measure"], took["wait"]) == (True, False)
    assert took["specsweep_say"].startswith(
        "config 2/3 s1: launching (taking over from b, which left the run)"
    )
    waiting = start(tmp_path, "s2", host="a", shared=True, lost={"b"}, retake=True)
    assert (waiting["measure"], waiting["wait"], waiting["specsweep_say"]) == (False, True, "")
    fact(tmp_path, "a", "s1")
    # The last pass looks only at what no host has recorded yet.
    assert progress.unrecorded(tmp_path, ["s1", "s2", "s3"]) == ["s2", "s3"]
    fact(tmp_path, "c", "s2", status="failed")  # c recorded it (a failure too): nothing left to wait for
    assert progress.unrecorded(tmp_path, ["s1", "s2", "s3"]) == ["s3"]
    done = start(tmp_path, "s2", host="a", shared=True, lost={"b"}, retake=True)
    assert (done["measure"], done["wait"], done["specsweep_say"]) == (False, False, "")
    # The first pass never waits: another host's claim is simply taken.
    assert start(tmp_path, "s4", host="c", shared=True)["measure"] is True
    first = start(tmp_path, "s4", host="a", shared=True)
    assert (first["measure"], first["wait"]) == (False, False)


def test_the_last_pass_of_shard_mode_takes_this_hosts_shared_launches_no_host_recorded(
    tmp_path: Path,
) -> None:
    entries = [entry(config(steps)) for steps in (None, 1, 2)]
    slots = [order.slot("baseline", 1, order.GRID, False), order.slot("s2", 1, order.GRID, True),
             order.slot("s1", 1, order.GRID, True), order.slot("s2", 2, order.GRID, True)]  # fmt: skip
    host = load(HostPlan, host_plan(entries, order=[Slot(**s, entry=0) for s in slots]))
    assert [s.name for s in progress.unrecorded_slots(tmp_path, host)] == ["s2", "s1", "s2.launch2"]
    fact(tmp_path, "b", "s1")  # another host's fact of it, whatever the host
    fact(tmp_path, "a", "s2.launch2", status="failed")
    assert [s.name for s in progress.unrecorded_slots(tmp_path, host)] == ["s2"]  # in this host's order


@pytest.mark.parametrize(
    ("mode", "steps", "claimed", "first"),
    [
        ("shard", 2, False, True),
        ("shard", None, False, False),
        ("shard", 2, True, False),
        ("replicate", 2, False, False),
    ],
    ids=["a shared config", "the baseline, every host's own", "a search's probe", "replicate"],
)
def test_only_a_shared_config_not_claimed_yet_goes_to_the_first_host_to_claim_it(
    mode: str, steps: int | None, claimed: bool, first: bool
) -> None:
    assert progress.claims_first(mode, config(steps), claimed) is first
