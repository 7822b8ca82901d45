"""Racing and finalists (analysis.running.race) and how a sweep's start uses them (analysis.running.progress):
a launch of a config that lost to the best is not run, recorded as a skipped fact, and resume passes it."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
from factories import config, entry, fact, host_plan, run
from local_play import run_local_play
from test_record import run_payload

from analysis.facts.schema import Fact, HostFacts, decode_fact, to_dict
from analysis.running import progress, race
from analysis.sweep import order
from analysis.sweep.hostplan import Slot


def launch(cid_steps: int | None, tps: list[float], k: int = 1, concurrency: int = 1) -> Fact:
    """One launch whose repeats decoded at these tok/s (2 requests each)."""
    runs = [run([t, t], repeat=i, concurrency=concurrency) for i, t in enumerate(tps, 1)]
    return msgspec.structs.replace(
        fact(config(cid_steps), runs, host="h"), launch_index=k, host_facts=HostFacts(hostname="h", gpus=[])
    )


def write(host_dir: Path, *facts: Fact) -> None:
    host_dir.mkdir(parents=True, exist_ok=True)
    for f in facts:
        (host_dir / f"{order.fact_name(f.config.id, f.launch_index)}.json").write_text(json.dumps(to_dict(f)))


# Launch 1 of four configs, and launch 2 of the baseline and s1: the sweep has measured launch spread.
FIRST = [
    launch(None, [100, 101, 99]),
    launch(1, [140, 142, 141]),
    launch(2, [90, 91, 89]),
    launch(3, [139, 150, 128]),
]
SECOND = [launch(None, [100, 102, 98], k=2), launch(1, [141, 140, 142], k=2)]


def test_a_config_clearly_slower_than_the_best_is_raced_out() -> None:
    step = race.table([*FIRST, *SECOND])
    assert race.raced_out(step, "s1") is None  # the best
    why = race.raced_out(step, "s2")
    assert why is not None and why.startswith("c=1: -36.2% [-37.") and why.endswith("vs s1"), why
    assert race.raced_out(step, "s3") is None  # within noise of the best
    assert race.raced_out(step, "baseline") is not None  # the rule holds for it too; the sweep never asks
    assert race.finalists(step, ["s1", "s2", "s3"]) == ["s1", "s3"]


def test_racing_drops_a_config_only_where_the_report_says_it_is_slower_than_the_best() -> None:
    # One launch each: the table allows the launch spread measured elsewhere, so -36% is within noise
    # of the best there, and racing (the table's own interval) drops nothing.
    step = race.table(FIRST)
    s2 = step[step["config"] == "s2"].iloc[0]
    assert (s2["ci_basis"], bool(s2["tie_best"])) == ("within_launch", True), s2
    assert race.raced_out(step, "s2") is None
    assert race.finalists(step, ["s1", "s2", "s3"]) == ["s1", "s2", "s3"]
    # Racing reads the report's table: what it drops is what the table marks as clearly slower.
    both = race.table([*FIRST, *SECOND])
    slower = both.loc[both["vs_best_ci_hi"] < 0, "config"]
    assert sorted(slower) == ["baseline", "s2"]
    assert [c for c in both["config"] if race.raced_out(both, c)] == ["baseline", "s2"]


def test_no_interval_no_race_and_a_level_it_may_win_keeps_it() -> None:
    # One repeat and no launch spread measured: the table has no interval for it.
    one_repeat = race.table([launch(1, [140, 141]), launch(2, [90])])
    assert one_repeat.loc[one_repeat["config"] == "s2", "vs_best_ci_hi"].isna().all()
    assert race.raced_out(one_repeat, "s2") is None
    # Slower at concurrency 1, the best at 4: it may still win there.
    both = race.table([
        *SECOND, launch(1, [140, 141, 142]), launch(2, [90, 91, 92]),
        launch(1, [300, 301, 302], concurrency=4), launch(2, [400, 401, 399], concurrency=4),
    ])  # fmt: skip
    assert race.raced_out(both, "s2") is None
    assert race.raced_out(race.table([]), "s2") is None
    assert race.finalists(race.table([]), ["s1"]) == []


def start(sweep: Path, config_id: str, k: int, race_on: bool = True) -> dict:
    where = {"dir": str(sweep), "run_id": "r1", "host": "h", "follows": None}
    return progress.start(where, config_id, 3, 7, False, 0.0, launch=k, race=race_on)


def test_a_raced_launch_is_not_run_but_recorded_and_resume_passes_it(tmp_path: Path) -> None:
    host = tmp_path / "h"
    write(host, *FIRST[:3], SECOND[0])
    (host / "s2.json").unlink()
    assert start(tmp_path, "s2", 1)["measure"] is True  # launch 1 is never raced
    write(host, launch(2, [90, 91, 89]))
    assert start(tmp_path, "s2", 2, race_on=False)["measure"] is True
    assert start(tmp_path, "s1", 2)["measure"] is True  # the best goes on
    raced = start(tmp_path, "s2", 2)
    assert raced["measure"] is False
    assert raced["specsweep_say"].startswith("config 4/7 s2.launch2: raced out (c=1: -36.")
    skipped = decode_fact((host / "s2.launch2.json").read_bytes())
    assert (skipped.status, skipped.launch_index, skipped.runs) == ("skipped", 2, [])
    assert skipped.raced_out is not None and skipped.config.id == "s2"
    # A resumed run does not launch it either, raced or not now.
    assert start(tmp_path, "s2", 2, race_on=False)["specsweep_say"].endswith(
        "s2.launch2: measured already, skipped; 4 measured here (0 failed)"
    )


def test_the_end_of_sweep_line_counts_the_launches_racing_saved(tmp_path: Path) -> None:
    host = tmp_path / "h"
    assert race.saved(tmp_path, ["h"]) == ""
    write(host, *FIRST[:3], SECOND[0])
    start(tmp_path, "s2", 2)
    start(tmp_path, "s2", 3)
    # The factories' launches took 1 s each; a CPU host has no GPU-minutes to save.
    assert race.saved(tmp_path, ["h"]) == (
        "racing: 2 launch(es) not run (h/s2.launch2, h/s2.launch3), saving about 0.0 launch-minutes, "
        "0.0 GPU-minutes"
    )


def test_launches_are_resumed_and_listed_by_their_own_names(tmp_path: Path) -> None:
    write(tmp_path / "h", launch(1, [140, 141]))
    assert start(tmp_path, "s1", 1, race_on=False)["measure"] is False
    assert start(tmp_path, "s1", 2, race_on=False)["measure"] is True
    planned = {"h": [Slot(**order.slot("s1", k, order.GRID, True), entry=0) for k in (1, 2)]}
    configs = [{"id": "s1", "speculative": True}]
    states = {"h": "finished"}
    lines = progress.unmeasured(tmp_path, ["h"], configs, {"mode": "replicate"}, states, planned)
    assert lines == ["h: finished; not measured: s1.launch2"]


def test_the_end_of_sweep_line_names_the_finalists_launches(tmp_path: Path) -> None:
    host = tmp_path / "h"
    write(host, launch(None, [100, 101]), launch(1, [140, 142]), launch(None, [100, 99], k=2))
    assert race.relaunched(tmp_path, ["h"], 1) == ""  # the baseline's launch 2 is the drift check
    write(host, launch(1, [139, 141], k=2))
    assert race.relaunched(tmp_path, ["h"], 1) == (
        "finalists launched once more before the winner was named: h/s1.launch2"
    )
    assert race.relaunched(tmp_path, ["h"], 2) == ""  # launch 2 of 2 is no finalist's


def test_the_end_of_sweep_line_names_a_relaunchs_levels_and_the_baseline_a_close_call_relaunched(
    tmp_path: Path,
) -> None:
    # Where the host's history spared the baseline its again-launch (the plan's closing is empty), its
    # launch 2 is a close call's relaunch, named like any finalist's; each with the levels it measured.
    host = tmp_path / "h"
    base, s1 = launch(None, [100, 101], k=2), launch(1, [139, 141], k=2)
    assert s1.benchmark is not None
    s1 = msgspec.structs.replace(s1, benchmark=msgspec.structs.replace(s1.benchmark, only=["chat:4"]))
    write(host, launch(None, [100, 101]), launch(1, [140, 142]), base, s1)
    said = "finalists launched once more before the winner was named: "
    relaunched = f"{said}h/baseline.launch2, h/s1.launch2 (at c=4 chat)"
    assert race.relaunched(tmp_path, ["h"], 1, {"h": []}) == relaunched
    # Planned as the baseline's again-launch (the drift check), it is no finalist's.
    again = race.relaunched(tmp_path, ["h"], 1, {"h": ["baseline.launch2"]})
    assert again == f"{said}h/s1.launch2 (at c=4 chat)"


def test_the_results_action_names_launch_k_and_picks_the_finalists(tmp_path: Path) -> None:
    host = tmp_path / "localhost"
    # s1 best, s2 (a step search's probe) within noise of it, s3 slower even allowing for the launch
    # spread one launch each cannot measure (the table's prior).
    write(host, launch(None, [100, 101, 99]), launch(1, [140, 142, 141]), launch(2, [139, 143, 138]))
    write(host, launch(3, [30, 31, 29]))
    entries = [entry(config(steps), searched=steps == 2) for steps in (None, 1, 2, 3)]
    plan = {"sweep": {"settings": {"launches": 1}}, "hosts": {"localhost": host_plan(entries)}}
    where = {"dir": str(tmp_path), "run_id": "run1", "host": "localhost", "follows": None, "followed": True}
    proc = run_local_play(tmp_path, [
        {"specsweep_results": {"fact": run_payload(launch_index="2"), "where": where},
         "register": "recorded"},
        {"specsweep_results": {"finalists": True, "where": where}, "vars": {"specsweep_plan": plan},
         "register": "chosen"},
        {"ansible.builtin.assert": {"that": [
            "recorded.specsweep_say == 's1.launch2: recorded'",
            "chosen.slots | map(attribute='name') == ['s1.launch2', 's2.launch2']",
            "chosen.slots | map(attribute='entry') == [1, 2]",
            "chosen.specsweep_say is search('launched once more before a winner is named: s1, s2')",
        ]}},
    ])  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert decode_fact((host / "s1.launch2.json").read_bytes()).launch_index == 2
    assert (tmp_path / ".claims" / "run1" / "localhost-s1.launch2.recorded").is_file()


def test_a_finalist_launch_dropped_because_its_fact_was_kept_on_the_host_is_named_at_the_end(
    tmp_path: Path,
) -> None:
    # s1's fact did not fit the results disk (kept on the host): before, its finalist launch was
    # dropped without a word and only a resume ran it.
    write(tmp_path / "localhost", launch(None, [100, 101, 99]), launch(3, [30, 31, 29]))
    entries = [entry(config(steps)) for steps in (None, 1, 3)]
    plan = {"sweep": {"settings": {"launches": 1}}, "hosts": {"localhost": host_plan(entries)}}
    where = {"dir": str(tmp_path), "run_id": "run1", "host": "localhost", "follows": None, "followed": False}
    kept = [{"name": "s1", "dest": "/var/tmp/specsweep/run/F.s1.fact.json"}]
    out = tmp_path / "chosen.json"
    proc = run_local_play(tmp_path, [
        {"specsweep_results": {"finalists": True, "where": where},
         "vars": {"specsweep_plan": plan, "specsweep_kept": kept}, "register": "chosen"},
        {"ansible.builtin.copy": {"dest": str(out), "mode": "0644", "content": "{{ chosen | to_json }}"}},
    ])  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    chosen = json.loads(out.read_text())
    assert chosen["dropped"] == ["s1.launch2"] and "s1" not in chosen["specsweep_say"], chosen
    lines = progress.dropped("F", ["localhost"], {"localhost": {"specsweep_finalists": chosen}})
    assert lines == [
        "localhost: not launched: s1.launch2 (the finalist launch of a config whose fact is kept on the "
        "host, so not judged); -e resume=F records it, then judges"
    ]
