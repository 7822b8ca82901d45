"""What a rollout decides on the host (analysis.deploy.rollout): launcher, kept state, no-op, settle,
and the words a failed one stops with."""

from __future__ import annotations

import base64
import json

import pytest
from plugin_loader import load_plugin

from analysis.deploy import rollout

TARGET = {"config": "s2", "sweep_id": "sweep-1", "argv_sha256": "ab12", "port": 8000, "api_key": "k"}
BOOTED = {"stat": {"exists": True, "isdir": True}}
NOT_BOOTED = {"stat": {"exists": False}}
SKIPPED = {"skipped": True, "changed": False}


@pytest.mark.parametrize(
    ("asked", "systemd_run", "how"),
    [
        ("auto", BOOTED, "systemd"),
        ("auto", NOT_BOOTED, "nohup"),
        ("nohup", SKIPPED, "nohup"),
        ("systemd", SKIPPED, "systemd"),
        ("nohup", BOOTED, "nohup"),
    ],
)
def test_auto_is_systemd_where_the_host_runs_it_and_an_asked_launcher_stands(
    asked: str, systemd_run: dict, how: str
) -> None:
    assert rollout.launcher(asked, systemd_run) == how


def test_an_unknown_launcher_is_refused_naming_the_variable() -> None:
    with pytest.raises(ValueError, match="deploy_launcher: 'docker' is not one of: auto, systemd, nohup"):
        rollout.launcher("docker", SKIPPED)


def test_the_kept_state_is_the_entry_without_its_api_key_with_launcher_and_run_id() -> None:
    kept = rollout.state({**TARGET, "launcher": "stale"}, "systemd", "run-7")
    assert kept == {
        **{k: v for k, v in TARGET.items() if k != "api_key"},
        "launcher": "systemd",
        "run_id": "run-7",
    }
    assert "api_key" in TARGET, "the plan's entry itself is left as it was"


@pytest.mark.parametrize(
    ("before", "how", "same"),
    [
        ({"argv_sha256": "ab12", "launcher": "nohup"}, "nohup", True),
        ({"argv_sha256": "ab12", "launcher": "nohup"}, "systemd", False),
        ({"argv_sha256": "cd34", "launcher": "nohup"}, "nohup", False),
        ({}, "nohup", False),
    ],
)
def test_the_same_launch_serves_already_only_with_the_same_hash_and_launcher(
    before: dict, how: str, same: bool
) -> None:
    assert rollout.serves_already(before, TARGET, how) is same


@pytest.mark.parametrize(
    ("settled", "words"),
    [
        ({}, "nothing deployed by specsweep"),
        ({"config": "s2", "sweep_id": "sweep-1", "run_id": "run-7"}, "new: s2 of sweep sweep-1"),
        ({"config": "s1", "sweep_id": "sweep-0", "run_id": "run-6"}, "old: s1 of sweep sweep-0"),
        ({"config": "s1", "sweep_id": "sweep-0"}, "old: s1 of sweep sweep-0"),
    ],
)
def test_the_settle_says_whether_the_host_serves_this_rollouts_config(settled: dict, words: str) -> None:
    assert rollout.settled_words(settled, "run-7") == words


def test_deployed_json_is_read_from_its_slurp_and_a_missing_one_is_nothing_deployed() -> None:
    kept = {"config": "s2", "sweep_id": "sweep-1", "launcher": "nohup"}
    slurped = {"content": base64.b64encode(json.dumps(kept).encode()).decode(), "encoding": "base64"}
    assert rollout.read_state(slurped) == kept
    missing = {"failed": True, "msg": "file not found: /srv/specsweep/deployed.json"}
    assert rollout.read_state(missing) == {}
    assert rollout.before_words(kept) == "s2 of sweep sweep-1"
    assert rollout.before_words({}) == "what ran before (nothing deployed by specsweep)"


def test_a_failure_names_the_verdicts_gate_else_the_stage_and_one_short_line_of_why() -> None:
    gated = {"verdict": {"gate": "throughput"}, "msg": "tok/s 80.0\n  below the floor 90.0"}
    assert rollout.failure_words(gated, "benchmark") == "throughput failed: tok/s 80.0 below the floor 90.0"
    assert rollout.failure_words({"msg": "no /health"}, "health") == "health failed: no /health"
    assert rollout.failure_words({}, "start") == "start failed: failed"
    long = rollout.failure_words({"msg": "word " * 200}, "start")
    assert long.startswith("start failed: word word") and long.endswith("word...")
    assert len(long) <= len("start failed: ") + rollout.WHY_CHARS, len(long)


def test_the_filters_hand_the_role_these_functions() -> None:
    filters = load_plugin("plugins/filter/specsweep_deploy.py").FilterModule().filters()
    assert filters == {
        "specsweep_deploy_launcher": rollout.launcher,
        "specsweep_deployed_state": rollout.state,
        "specsweep_serves_already": rollout.serves_already,
        "specsweep_settled_words": rollout.settled_words,
        "specsweep_deployed_read": rollout.read_state,
        "specsweep_before_words": rollout.before_words,
        "specsweep_deploy_failure": rollout.failure_words,
    }


def test_a_deploy_whose_canary_was_unreachable_names_the_hosts_left_on_their_old_config() -> None:
    hosts = ["h1", "h2", "h3"]
    # Before, it exited 4 naming the canary, not that h2 and h3 were never touched.
    said = rollout.untouched(hosts, {"h1"}, "h1", {"h1": "was unreachable"})
    assert said == (
        "deploy stopped (the canary h1 was unreachable): h2, h3 not touched, left on their old config"
    )
    # A later batch's failure stops the rest; a deploy that reached every host says nothing.
    said = rollout.untouched(hosts, {"h1", "h2"}, "h1", {"h2": "failed"})
    assert said == "deploy stopped (h2 failed): h3 not touched, left on their old config"
    assert rollout.untouched(hosts, set(hosts), "h1", {"h3": "failed"}) is None
