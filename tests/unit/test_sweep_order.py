"""The order a host launches its configs in (analysis.sweep.order) and what the plan makes of it:
launches, the seeded shuffle recorded in sweep.json, the baseline again, the estimate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from analysis.sweep import order, plan, request

GRID = [("baseline", False), ("s1", True), ("s2", True), ("s3", True), ("s4", True), ("s5", True)]
LLAMA: dict[str, Any] = {
    "command": ["/opt/python", "/opt/specsweep_llama_server.py"], "model_path": "/models/m.gguf",
    "host": "127.0.0.1", "port": 8080, "threads": 1, "ctx_size": 2048, "parallel": 1, "metrics": True,
    "ngram_n_match": 4, "ngram_n_min": 1, "env": {}, "extra_args": [], "health_timeout_s": 120,
    "packages": [],
}  # fmt: skip
IDENTITY = plan.Identity(
    sweep_id="sw", sweep_dir="/results/sw", run_id="r1", git_rev=None, repo="/repo", started_at=5.0
)


def names(slots: list[dict[str, Any]]) -> list[str]:
    return [s["name"] for s in slots]


def test_launch_k_is_its_own_fact_name_and_reads_back() -> None:
    assert order.fact_name("s2-k4-d8", 1) == "s2-k4-d8"  # launch 1: the name facts always had
    assert order.fact_name("s2-k4-d8", 3) == "s2-k4-d8.launch3"
    for cid in ("baseline", "s2-k4-d8@nccl.ll", "s1"):
        for k in (1, 2, 12):
            assert order.parse_name(order.fact_name(cid, k)) == (cid, k)
    assert order.parse_name("x.launch1") == ("x.launch1", 1)  # never written: not a launch suffix


def test_a_seed_and_a_host_replay_the_same_order() -> None:
    one = order.schedule(GRID, 2, 7, "h1", 10)
    assert order.schedule(GRID, 2, 7, "h1", 10) == one
    assert order.schedule(GRID, 2, 8, "h1", 10) != one
    assert order.schedule(GRID, 2, 7, "h2", 10) != one  # hosts do not run in lockstep


def test_each_round_is_a_permutation_and_the_baseline_is_not_always_first() -> None:
    firsts = set()
    for seed in range(20):
        ordered, _ = order.schedule(GRID, 3, seed, "h", 0)
        for k in (1, 2, 3):
            round_ = [s["id"] for s in ordered[(k - 1) * len(GRID) : k * len(GRID)]]
            assert sorted(round_) == sorted(c for c, _ in GRID)
            assert all(s["launch"] == k for s in ordered[(k - 1) * len(GRID) : k * len(GRID)])
        firsts.add(ordered[0]["id"])
    assert len(firsts) > 2 and "baseline" in firsts


def test_without_a_seed_the_grid_order() -> None:
    ordered, closing = order.schedule(GRID, 2, None, "h", 0)
    assert names(ordered) == [c for c, _ in GRID] + [f"{c}.launch2" for c, _ in GRID]
    assert closing == []


def test_the_baseline_again_every_k_launches_and_at_the_end() -> None:
    ordered, closing = order.schedule(GRID, 1, None, "h", 2)
    assert names(ordered) == [
        "baseline", "s1", "s2", "baseline.launch2", "s3", "s4", "baseline.launch3", "s5",
    ]  # fmt: skip
    assert names(closing) == ["baseline.launch4"]
    assert {s["why"] for s in ordered if s["name"].startswith("baseline.")} == {order.CHECK}
    # Every stretch of the shuffled order has a baseline within k + 1 launches.
    shuffled, _ = order.schedule(GRID, 3, 11, "h", 3)
    since = 0
    for s in shuffled:
        since = 0 if not s["speculative"] else since + 1
        assert since <= 3
    # Nothing compared with the baseline, or baseline_every 0: it is not launched again.
    assert order.schedule([("baseline", False)], 1, 1, "h", 2)[1] == []
    assert order.schedule(GRID, 1, 1, "h", 0)[1] == []


def build(tmp_path: Path, hosts: dict[str, plan.HostInput] | None = None, **given: Any) -> dict[str, Any]:
    hosts = hosts or {"h0": plan.HostInput("h0", "llama_cpp", LLAMA)}
    return plan.build(request.read(given), hosts, IDENTITY, tmp_path)


def test_the_plan_records_the_seed_it_drew_and_that_seed_replays_the_order(tmp_path: Path) -> None:
    drawn = build(tmp_path, steps="1..4", launches=2)
    seed = drawn["sweep"]["settings"]["order_seed"]
    assert isinstance(seed, int)
    replay = build(tmp_path, steps="1..4", launches=2, order_seed=seed)
    assert replay["hosts"]["h0"]["order"] == drawn["hosts"]["h0"]["order"]
    slots = drawn["hosts"]["h0"]["order"] + drawn["hosts"]["h0"]["closing"]
    entries = drawn["hosts"]["h0"]["entries"]
    assert all(entries[s["entry"]]["config"]["id"] == s["id"] for s in slots)
    assert sorted(n for n in names(slots) if "launch3" not in n) == sorted(
        [c for c in ("baseline", "s1", "s2", "s3", "s4")]
        + [f"{c}.launch2" for c in ("baseline", "s1", "s2", "s3", "s4")]
    )
    grid = build(tmp_path, steps="1..4", order="grid")
    assert grid["sweep"]["settings"]["order_seed"] is None
    assert plan.summary(grid["sweep"]).endswith("; grid order")
    assert plan.summary(replay["sweep"]).endswith(f"; random order (order_seed={seed})")


def test_a_follower_runs_its_leaders_order(tmp_path: Path) -> None:
    hosts = {
        "lead": plan.HostInput("lead", "llama_cpp", LLAMA),
        "other": plan.HostInput("other", "llama_cpp", LLAMA),
        "rank1": plan.HostInput("rank1", "llama_cpp", LLAMA, follows="lead"),
    }
    built = build(tmp_path, hosts, steps="1..6", order_seed=3)
    assert built["errors"] == []
    order_of = {h: names(built["hosts"][h]["order"]) for h in hosts}
    assert order_of["rank1"] == order_of["lead"] != order_of["other"]


def test_the_estimate_counts_every_launch(tmp_path: Path) -> None:
    # 3 configs x 2 launches, the baseline once more at the end; no finalists with 2 launches, and
    # racing (on by default) may leave out each speculative config's second: 7 at most, 5 at least,
    # those two at even odds (a config clearly behind is known only once measured).
    est = build(tmp_path, steps="1,2", launches=2)["sweep"]["estimate"]
    assert (est["launches_per_host"], est["launches_least"], est["launches_most"]) == (6, 5, 7)
    assert est["span_by"] == ["racing"] and "as racing goes" in est["text"], est["text"]
    assert est["seconds_least"] < est["seconds"] < est["seconds_most"]
    said = plan.launch_count(est)
    raced = "a config clearly behind is raced out of its later launches"
    assert said == f"6 launch(es) per host (5 to 7: {raced}, counted at even odds)"
    unraced = build(tmp_path, steps="1,2", launches=2, race="false")["sweep"]["estimate"]
    assert (unraced["launches_per_host"], unraced["launches_least"], unraced["launches_most"]) == (7, 7, 7)
    assert plan.launch_count(unraced) == "7 launch(es) per host" and " as " not in unraced["text"]
    # One launch, no history of the host's launch spread: on the assumed 25% every speculative
    # config is within noise of the best, so each is a finalist (analysis.running.prior).
    assert build(tmp_path, steps="1,2")["sweep"]["estimate"]["launches_per_host"] == 3 + 1 + 2
    assert (
        build(tmp_path, steps="1,2", finalists="false", baseline_every=0)["sweep"]["estimate"][
            "launches_per_host"
        ]
        == 3
    )


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ({"race": "true"}, "race: needs launches >= 2"),
        ({"race": "true", "launches": 2, "mode": "shard"}, "race: needs mode=replicate without search"),
        ({"launches": 0}, "launches: 0 is below the minimum of 1"),
        ({"order": "sorted"}, "order: 'sorted' is not one of"),
        ({"order_seed": "-1"}, "order_seed:"),
        ({"baseline_every": "x"}, "baseline_every:"),
    ],
)
def test_bad_launch_settings_are_refused_at_plan_time(tmp_path: Path, given: dict, error: str) -> None:
    built = build(tmp_path, steps="1,2", **given)
    assert any(e.startswith(error) for e in built["errors"]), built["errors"]


def test_racing_defaults_to_on_where_a_host_launches_each_config_twice_or_more() -> None:
    assert request.read({})["race"] is False
    assert request.read({"launches": 2})["race"] is True
    assert request.read({"launches": 2, "mode": "shard"})["race"] is False
    assert request.read({"launches": 2, "search": "steps", "steps_range": "1..4"})["race"] is False
    assert request.read({"launches": 3, "race": "false"})["race"] is False
    # A resume that changes launches derives racing anew, as it does the finalists.
    kept = request.resumed(request.read({"launches": 2}).values, {"launches": 1})
    assert request.read({"launches": 1}, kept)["race"] is False


def test_finalists_default_to_on_for_one_launch_only() -> None:
    assert request.read({})["finalists"] is True
    assert request.read({"launches": 3})["finalists"] is False
    assert request.read({"launches": 3, "finalists": "yes"})["finalists"] is True
