"""The host's launch spread from its history (analysis.running.prior): where it comes from, the
finalists it relaunches (only a close call), the one-launch verdicts it widens, and where it is
said and recorded (the plan's lines, each fact, the report's note)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec
import pytest
from factories import config, entry, fact, host_plan, run
from local_play import run_local_play
from test_record import run_payload
from test_sweep_plan import IDENTITY, ONE_LAUNCH_EACH, build, llama
from test_sweep_race import FIRST, SECOND, launch, write

from analysis.facts import record
from analysis.facts.schema import Engine, Fact
from analysis.report import closecall
from analysis.report.render import prior_note
from analysis.running import prior, race
from analysis.sweep import launchprior, outcome, plan, request
from analysis.sweep.launchprior import LaunchPrior


def known(cv_pct: float, df: float = 30.0) -> LaunchPrior:
    return LaunchPrior(cv_pct=cv_pct, df=df, source="test history", from_history=True)


def judged(facts: list[Fact], p: LaunchPrior) -> list[Fact]:
    """The facts as a plan with launch prior `p` records them."""
    return [msgspec.structs.replace(f, launch_prior=p) for f in facts]


# --------------------------------------------------------------------------------------
# The decision rule: close vs clear, given a spread
# --------------------------------------------------------------------------------------


def test_a_small_known_spread_relaunches_only_the_close_call() -> None:
    # One launch each: s1 141 tok/s the best, s4 134 (5.0% behind) but unsteady over its repeats,
    # s2 90 (36% behind).
    small = known(2.0)
    step = race.table(judged([*FIRST[:3], launch(4, [128, 140, 134])], small))
    assert prior.finalists(step, ["s1", "s2", "s4"], small) == ["s1", "s4"]
    # The report's own interval says the same: s2 is clearly slower at that spread, s4 within it.
    s2, s4 = (step[step["config"] == c].iloc[0] for c in ("s2", "s4"))
    assert s2["vs_best_ci_hi"] < 0 and bool(s4["tie_best"]), (s2["vs_best_ci_hi"], s4["tie_best"])
    assert race.raced_out(step, "s2") is not None


def test_a_rival_only_a_95_percent_interval_keeps_is_not_relaunched() -> None:
    # s4 5.0% behind s1 with steady repeats: its 95% interval against the best just holds 0 (the
    # verdict: within noise), its 80% one does not, so the one launch decides (FINALIST_CONFIDENCE);
    # at the verdicts' 95% the pair would be relaunched.
    small = known(2.0)
    step = race.table(judged([*FIRST[:3], launch(4, [134, 135, 133])], small))
    s4 = step[step["config"] == "s4"].iloc[0]
    assert bool(s4["tie_best"]) and 0 < s4["vs_best_ci_hi"] < 2, s4["vs_best_ci_hi"]
    assert prior.finalists(step, ["s1", "s2", "s4"], small) == []
    assert prior.finalists(step, ["s1", "s2", "s4"], small, confidence=0.95) == ["s1", "s4"]
    assert launchprior.close_gap_pct(small, 1, launchprior.FINALIST_CONFIDENCE) == pytest.approx(
        launchprior.close_gap_pct(small) * 1.2816 / 1.96, rel=0.01
    )


def test_a_call_one_more_launch_cannot_resolve_is_too_close_to_call() -> None:
    # s3 is 1.4% behind s1: at a 2% spread two launches of each resolve 2.6% or more at 80% (4.0%
    # at 95%), so its relaunch (main's rule: ["s1", "s3"]) is not made, and the run and the report
    # say why.
    small = known(2.0)
    step = race.table(judged(FIRST, small))
    assert launchprior.close_gap_pct(small, launchprior.FINALIST_LAUNCHES) == pytest.approx(4.0, abs=0.1)
    assert launchprior.close_gap_pct(small, 2, launchprior.FINALIST_CONFIDENCE) == pytest.approx(2.6, abs=0.1)
    assert prior.finalists(step, ["s1", "s2", "s3"], small) == []
    assert closecall.too_close(step, small) == [
        "c=1: s1, s3 too close to call at this host's spread (1.4% apart; 2 launches of each resolve "
        "2.6% or more at 80%)"
    ]
    assert "s1, s3 too close to call" in prior_note(step, step.index.to_numpy())
    # At a spread a fifth as wide the same 1.4% is resolvable by one more launch: relaunched.
    tiny = known(0.6)
    assert prior.finalists(race.table(judged(FIRST, tiny)), ["s1", "s2", "s3"], tiny) == ["s1", "s3"]
    assert closecall.too_close(race.table(judged(FIRST, tiny)), tiny) == []


def test_a_clear_decision_at_a_known_spread_relaunches_nothing() -> None:
    small = known(2.0)
    clear = [FIRST[0], FIRST[1], FIRST[2]]  # baseline 100, s1 141, s2 90
    assert prior.finalists(race.table(judged(clear, small)), ["s1", "s2"], small) == []
    # The same measurements on a host whose history spread is wide: s2 may be the best after all,
    # but one more launch of each could not tell 36% apart at a 30% spread: too close to call.
    wide = known(30.0)
    assert prior.finalists(race.table(judged(clear, wide)), ["s1", "s2"], wide) == []
    assert closecall.too_close(race.table(judged(clear, wide)), wide)[0].startswith(
        "c=1: s1, baseline, s2 too close to call at this host's spread (29.1% apart"
    )


def test_a_close_call_with_the_baseline_relaunches_it_and_the_config() -> None:
    small = known(2.0)
    close = [launch(None, [100, 101, 99]), launch(1, [88, 102, 95]), launch(2, [60, 61, 59])]
    # The baseline is the best, s1 5% behind and unsteady: both are launched again (the action offers
    # the baseline as a candidate where the history spared it its again-launch).
    step = race.table(judged(close, small))
    assert prior.finalists(step, ["baseline", "s1", "s2"], small) == ["baseline", "s1"]
    assert prior.finalists(step, ["s1", "s2"], small) == ["s1"]


def two_levels(steps: int | None, at_1: list[float], at_4: list[float]) -> Fact:
    """One launch measured at c = 1 and c = 4, its repeats at these tok/s."""
    one, four = launch(steps, at_1), launch(steps, at_4, concurrency=4)
    return msgspec.structs.replace(one, runs=[*one.runs, *four.runs])


def test_a_close_calls_relaunch_measures_only_its_level() -> None:
    # c = 1 is close (the baseline the best, s1 5% behind and unsteady), c = 4 clear (s1 50% ahead):
    # the pair is relaunched at c = 1 only, which the client's --only names; without the host's
    # spread, each config where it is best or within noise of the best at the assumed 25%: s1 at
    # both, the baseline (50% behind at c = 4) at c = 1.
    small = known(2.0)
    facts = [two_levels(None, [100, 101, 99], [200, 201, 199]), two_levels(1, [88, 102, 95], [300, 301, 299])]
    step = race.table(judged(facts, small))
    chosen = prior.finalist_levels(step, ["baseline", "s1"], small)
    assert chosen == {"baseline": [(None, 1.0)], "s1": [(None, 1.0)]}
    assert [prior.only(step, levels) for levels in chosen.values()] == [["1"], ["1"]]
    assert race.measured_levels(step) == [(None, 1.0), (None, 4.0)]
    assert prior.only(step, [(None, 4.0), (None, 1.0)]) == []  # every level: no --only
    unknown = prior.finalist_levels(step, ["baseline", "s1"], None)
    assert unknown == {"baseline": [(None, 1.0)], "s1": [(None, 1.0), (None, 4.0)]}
    assert race.finalists(step, ["baseline", "s1"]) == ["baseline", "s1"]


def test_the_finalists_action_relaunches_the_baseline_of_a_close_call_where_history_spared_it(
    tmp_path: Path,
) -> None:
    # No closing baseline launch (the host's history): the baseline, best, and s1 5% behind (and
    # unsteady) at c = 1 are launched again, at c = 1 only (c = 4 is clear: s1 50% ahead); s2 is
    # clearly behind. main's action offered only s1, at every level.
    host = tmp_path / "localhost"
    close = [
        two_levels(None, [100, 101, 99], [200, 201, 199]),
        two_levels(1, [88, 102, 95], [300, 301, 299]),
        two_levels(2, [60, 61, 59], [120, 121, 119]),
    ]
    write(host, *judged(close, known(2.0)))  # as the plan's launch prior has each fact record it
    entries = [entry(config(steps)) for steps in (None, 1, 2)]
    plans = {"localhost": host_plan(entries, launch_prior=known(2.0))}
    plan_ = {"sweep": {"settings": {"launches": 1}}, "hosts": plans}
    where = {"dir": str(tmp_path), "run_id": "run1", "host": "localhost", "follows": None, "followed": False}
    proc = run_local_play(tmp_path, [
        {"specsweep_results": {"finalists": True, "where": where}, "vars": {"specsweep_plan": plan_},
         "register": "chosen"},
        {"ansible.builtin.assert": {"that": [
            "chosen.slots | map(attribute='name') == ['baseline.launch2', 's1.launch2']",
            "chosen.slots | map(attribute='speculative') == [false, true]",
            "chosen.slots | map(attribute='levels') == [['1'], ['1']]",
            "chosen.specsweep_say is search('baseline \\(at c=1\\), s1 \\(at c=1\\) \\(a close call\\)')",
        ]}},
    ])  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_without_history_the_finalists_are_chosen_as_before() -> None:
    # The assumed 25%: the best and every config within noise of it (race.finalists' rule).
    step = race.table(judged(FIRST, launchprior.ASSUMED))
    assert prior.finalists(step, ["s1", "s2", "s3"], launchprior.ASSUMED) == ["s1", "s2", "s3"]
    assert prior.finalists(step, ["s1", "s2", "s3"], None) == race.finalists(step, ["s1", "s2", "s3"])
    # Facts without a recorded prior (older plans) are judged on the same assumed spread.
    assert race.table(FIRST)["vs_best_ci_lo"].equals(step["vs_best_ci_lo"])


def test_the_close_gap_grows_with_the_spread_and_its_uncertainty() -> None:
    # At 95%, 1.96 x sqrt(2) x 2% on a known spread: 5.4% behind the best is within noise.
    assert launchprior.close_gap_pct(known(2.0, df=0)) == pytest.approx(5.4, abs=0.1)
    assert launchprior.close_gap_pct(known(2.0, df=3)) > launchprior.close_gap_pct(known(2.0, df=300))
    assert launchprior.close_gap_pct(known(10.0)) > launchprior.close_gap_pct(known(2.0))


# --------------------------------------------------------------------------------------
# Where the spread comes from
# --------------------------------------------------------------------------------------


def earlier(results: Path, name: str, facts: list[Fact]) -> None:
    write(results / name / "h", *[msgspec.structs.replace(f, sweep_id=name) for f in facts])
    (results / name / "sweep.json").write_text("{}")


def test_the_spread_is_pooled_over_earlier_sweeps_that_launched_a_config_twice(tmp_path: Path) -> None:
    assert prior.from_history(tmp_path, "h", "sglang", "Kimi-K2.5", "now") == launchprior.ASSUMED
    earlier(tmp_path, "once", FIRST)  # no config launched twice: no spread
    assert prior.from_history(tmp_path, "h", "sglang", "Kimi-K2.5", "now") == launchprior.ASSUMED
    earlier(tmp_path, "twice", [*FIRST, *SECOND])
    step = race.table([*FIRST, *SECOND])
    found = prior.from_history(tmp_path, "h", "sglang", "Kimi-K2.5", "now")
    assert found.from_history and found.df == step["launch_df"].iloc[0] == 2
    assert found.cv_pct == pytest.approx(step["launch_cv_pct"].iloc[0])
    assert found.source == "1 earlier sweep(s) on h (twice), 2 df"
    earlier(tmp_path, "again", [*FIRST, *SECOND])
    assert prior.from_history(tmp_path, "h", "sglang", "Kimi-K2.5", "now").df == 4
    # Another host, engine or model has its own spread; this sweep's own facts (a resume) are not history.
    assert prior.from_history(tmp_path, "other", "sglang", "Kimi-K2.5", "now") == launchprior.ASSUMED
    assert prior.from_history(tmp_path, "h", "sglang", "Llama", "now") == launchprior.ASSUMED
    assert prior.from_history(tmp_path, "h", "llama_cpp", "Kimi-K2.5", "now") == launchprior.ASSUMED
    assert prior.from_history(tmp_path, "h", "sglang", "Kimi-K2.5", "again").df == 2


def swept(results: Path, name: str, facts: list[Fact], **settings: object) -> None:
    """An earlier sweep on host h with these settings in its sweep.json."""
    earlier(results, name, facts)
    (results / name / "sweep.json").write_text(json.dumps({"settings": settings}))


def test_the_odds_of_a_close_call_and_of_racing_come_from_the_hosts_earlier_sweeps(tmp_path: Path) -> None:
    one = {"launches": 1, "finalists": True, "race": False}
    # Judged at a spread from history: one relaunched s1 (a close call), one only the baseline again.
    swept(tmp_path, "close", judged([*FIRST, *SECOND], known(2.0)), **one)
    swept(tmp_path, "clear", judged([*FIRST, SECOND[0]], known(2.0)), **one)
    # Finalists chosen on the assumed spread relaunch every rival: not a close call, not counted.
    swept(tmp_path, "assumed", [*FIRST, *SECOND], **one)
    found = prior.from_history(tmp_path, "h", "sglang", "Kimi-K2.5", "now")
    assert (found.close_calls, found.raced) == ((1, 2), None)
    # Racing, two launches each: s2's and s3's second launches were raced out, s1's ran.
    out = [
        msgspec.convert(race.skipped_fact(f, 2, "c=1: -30% vs s1", 0.0), Fact) for f in (FIRST[2], FIRST[3])
    ]
    swept(tmp_path, "raced", [*FIRST, *SECOND, *out], launches=2, finalists=False, race=True)
    found = prior.from_history(tmp_path, "h", "sglang", "Kimi-K2.5", "now")
    assert (found.close_calls, found.raced) == ((1, 2), (2, 3))
    # The estimate counts at those odds, and says so; none known: even.
    by = ["racing", "finalists"]
    said = "at this host's odds: a close call in 1 of 2 earlier sweep(s), 2 of 3 later launch(es) raced out"
    assert launchprior.odds(found, by) == launchprior.LaunchOdds(0.5, 2 / 3, f"{said} before")
    assert launchprior.odds(found, ["racing"]).close_call == 0.5
    assert launchprior.odds(launchprior.ASSUMED, by) == launchprior.LaunchOdds(0.5, 0.5, "at even odds")


# --------------------------------------------------------------------------------------
# Where it is said and recorded
# --------------------------------------------------------------------------------------


def gemma_sweep(results: Path, settings: dict | None = None, p: LaunchPrior | None = None) -> None:
    """An earlier llama.cpp sweep on h0 with the baseline launched twice; its sweep.json's
    `settings` and its facts' launch prior `p` where given."""
    engine = Engine(name="llama_cpp", model="/models/gemma.gguf", launcher="nohup")
    facts = [
        msgspec.structs.replace(fact(config(s), [run([t, t], repeat=r) for r in (1, 2, 3)], host="h0",
                                     sweep_id="old", engine=engine), launch_index=k, launch_prior=p)
        for s, t, k in ((None, 40.0, 1), (1, 36.0, 1), (None, 44.0, 2))
    ]  # fmt: skip
    write(results / "old" / "h0", *facts)
    (results / "old" / "sweep.json").write_text(json.dumps({"settings": settings} if settings else {}))


def test_the_estimate_counts_a_close_call_at_the_odds_the_hosts_history_gives(tmp_path: Path) -> None:
    # The earlier sweep judged its one launch at a spread from history and made no close call.
    gemma_sweep(tmp_path / "r", {"launches": 1, "finalists": True, "race": False}, known(2.0))
    given = request.read({**ONE_LAUNCH_EACH, "steps": "1", "finalists": "true"})

    def history(host: str, engine: str, model: str | None) -> LaunchPrior:
        return prior.from_history(tmp_path / "r", host, engine, model, IDENTITY.sweep_id)

    built = plan.build(given, {"h0": llama()}, IDENTITY, tmp_path / "r", history)
    estimate = built["sweep"]["estimate"]
    # The same span as at even odds (2 to 4), counted at none: the two certain launches.
    assert (estimate["launches_per_host"], estimate["launches_least"], estimate["launches_most"]) == (2, 2, 4)
    said = plan.headline(built["sweep"], built["hosts"])
    assert "2 launch(es) per host (2 to 4: finalists launch again on a close call only, counted at " in said
    assert "counted at this host's odds: a close call in 0 of 1 earlier sweep(s))" in said, said
    # Two sweeps more, one of which relaunched s1: a close call in 1 of 3, its pair at 1/3, to a tenth.
    for name in ("older", "oldest"):
        shutil.copytree(tmp_path / "r" / "old", tmp_path / "r" / name)
    s1 = json.loads((tmp_path / "r" / "old" / "h0" / "s1.json").read_text())
    (tmp_path / "r" / "oldest" / "h0" / "s1.launch2.json").write_text(json.dumps({**s1, "launch_index": 2}))
    est = plan.build(given, {"h0": llama()}, IDENTITY, tmp_path / "r", history)["sweep"]["estimate"]
    assert (est["launches_per_host"], est["launches_least"], est["launches_most"]) == (2.7, 2, 4)
    assert est["counted"] == "at this host's odds: a close call in 1 of 3 earlier sweep(s)"
    assert "+ 2.7 x (load" in est["text"] and plan.launch_count(est).startswith("2.7 launch(es) per host")


def test_the_plan_says_the_spread_its_source_and_the_finalists_it_relaunches(tmp_path: Path) -> None:
    no_history = build([llama()], tmp_path / "none", steps="1,2", finalists="true")
    said = plan.headline(no_history["sweep"], no_history["hosts"])
    assert "h0: launch spread 25% (assumed: no earlier sweep" in said, said
    assert "every config within noise of it (up to 2)" in said
    gemma_sweep(tmp_path / "r")
    given = request.read({**ONE_LAUNCH_EACH, "steps": "1,2", "finalists": "true"})

    def history(host: str, engine: str, model: str | None) -> LaunchPrior:
        return prior.from_history(tmp_path / "r", host, engine, model, IDENTITY.sweep_id)

    built = plan.build(given, {"h0": llama()}, IDENTITY, tmp_path / "r", history)
    assert built["errors"] == []
    recorded = built["hosts"]["h0"]["launch_prior"]
    assert recorded["from_history"] and recorded["source"] == "1 earlier sweep(s) on h0 (old), 1 df"
    said = plan.headline(built["sweep"], built["hosts"])
    assert f"h0: launch spread {recorded['cv_pct']:.1f}% from 1 earlier sweep(s) on h0 (old), 1 df" in said
    assert "only the best and its rivals of a closer call are launched again (0 to 2)" in said
    assert said.splitlines()[1] in plan.describe(plan.document(built))
    # The estimate counts every finalist where the spread is assumed; where it is known, a close
    # call's pair at even odds (one launch), and says the span: none (a clear decision) to every
    # candidate (the baseline too: no baseline-again launch here).
    known = built["sweep"]["estimate"]
    assert (known["launches_per_host"], known["launches_least"], known["launches_most"]) == (3 + 1, 3, 6)
    assert "4 launch(es) per host (3 to 6: finalists launch again on a close call only" in said
    assert known["seconds_least"] < known["seconds"] < known["seconds_most"]
    assert " to " in known["text"].split("(setup")[0] and "as the finalists go" in known["text"]
    assert no_history["sweep"]["estimate"]["launches_per_host"] == 3 + 2
    assert "5 launch(es) per host, about" in plan.headline(no_history["sweep"], no_history["hosts"])
    # One speculative config at a known spread: a close call with the baseline relaunches both.
    one = plan.build(request.read({**ONE_LAUNCH_EACH, "steps": "1", "finalists": "true"}), {"h0": llama()},
                     IDENTITY, tmp_path / "r", history)  # fmt: skip
    spans = one["sweep"]["estimate"]
    assert (spans["launches_per_host"], spans["launches_least"], spans["launches_most"]) == (3, 2, 4)
    assert "+ 3 x (load" in spans["text"], spans["text"]
    # At two levels the close call's pair is relaunched at its level only: about half a launch's
    # benchmark each, its own term in the text, and the least and most span it.
    asked = request.read({**ONE_LAUNCH_EACH, "steps": "1", "finalists": "true", "concurrency": "1,4"})
    two = plan.build(asked, {"h0": llama()}, IDENTITY, tmp_path / "r", history)["sweep"]["estimate"]
    assert (two["launches_per_host"], two["close_call"]) == (3, 1)
    assert two["close_bench_s"] < 0.6 * two["bench_s"], (two["close_bench_s"], two["bench_s"])
    each = two["load_s"] + two["overhead_s"]
    benchmark = 2 * two["bench_s"] + two["close_bench_s"]
    assert two["seconds"] == pytest.approx(two["setup_s"] + 3 * each + benchmark)
    assert two["seconds_least"] < two["seconds"] < two["seconds_most"]
    assert f"+ 2 x (load {two['load_s']:.0f} s" in two["text"], two["text"]
    assert f"+ 1 x (load {two['load_s']:.0f} s + suite {two['overhead_s']:.0f} s + benchmark " in two["text"]
    assert "of one level))" in two["text"], two["text"]
    # No finalists and no racing: nothing to say.
    quiet_request = request.read({**ONE_LAUNCH_EACH, "steps": "1,2"})
    quiet = plan.build(quiet_request, {"h0": llama()}, IDENTITY, tmp_path / "r", history)
    assert plan.priors(quiet["sweep"], quiet["hosts"]) == []


def test_a_known_spread_drops_the_baseline_again_launch_unless_it_is_asked_for(tmp_path: Path) -> None:
    # main made it on every host: one closing baseline launch, 7 launches for steps 1-5.
    gemma_sweep(tmp_path / "r")

    def history(host: str, engine: str, model: str | None) -> LaunchPrior:
        return prior.from_history(tmp_path / "r", host, engine, model, IDENTITY.sweep_id)

    def planned(results: Path, **given: str) -> dict:
        built = plan.build(
            request.read({"steps": "1..5", "order_seed": "1", **given}), {"h0": llama()}, IDENTITY,
            results, history if results == tmp_path / "r" else None,
        )  # fmt: skip
        assert built["errors"] == [], built["errors"]
        return built

    known_plan = planned(tmp_path / "r")
    assert known_plan["hosts"]["h0"]["closing"] == []
    assert not any(s["why"] == "baseline again" for s in known_plan["hosts"]["h0"]["order"])
    # 6 configs, no baseline again, one finalist at a known spread (a close call's pair counts 1).
    assert known_plan["sweep"]["estimate"]["launches_per_host"] == 6 + 1
    said = plan.headline(known_plan["sweep"], known_plan["hosts"])
    assert "no baseline-again launch: the host's earlier sweeps measured its launch-to-launch change" in said
    assert "-e baseline_every=10 launches it" in said
    # The setting recorded is the one given (none): a resume decides again from its history.
    assert known_plan["sweep"]["settings"]["baseline_every"] is None
    # Asked for, it is made on a host with history too.
    forced = planned(tmp_path / "r", baseline_every="10")
    assert [s["name"] for s in forced["hosts"]["h0"]["closing"]] == ["baseline.launch2"]
    assert "the baseline again 1 time(s) (baseline_every=10)" in plan.headline(
        forced["sweep"], forced["hosts"]
    )
    # No history: the first sweep on a host measures its spread with the baseline's second launch.
    first = planned(tmp_path / "none")
    assert [s["name"] for s in first["hosts"]["h0"]["closing"]] == ["baseline.launch2"]
    assert "the baseline again 1 time(s), every 10 launches and at the end: the first measure" in (
        plan.headline(first["sweep"], first["hosts"])
    )


def test_the_baseline_again_rule() -> None:
    assert launchprior.baseline_every(None, known(2.0)) == 0
    assert launchprior.baseline_every(None, launchprior.ASSUMED) == launchprior.BASELINE_EVERY == 10
    assert launchprior.baseline_every(None, None) == 10
    assert launchprior.baseline_every(3, known(2.0)) == 3
    assert launchprior.baseline_every(0, launchprior.ASSUMED) == 0


def test_each_fact_records_the_spread_and_the_report_names_it(tmp_path: Path) -> None:
    p = known(4.2, df=6)
    payload = outcome.payload(run_payload(launch_prior=msgspec.to_builtins(p)), None, [])
    assert record.build_fact(payload).launch_prior == p
    assert record.build_fact(outcome.payload(run_payload(), None, [])).launch_prior is None
    step = race.table(judged(FIRST, p))
    assert prior_note(step, step.index.to_numpy()) == (
        "one launch per config, the baseline's too: verdicts allow a launch-to-launch CV of 4.2% "
        "(the host's earlier sweeps, 6 df; a sweep's drift included); c=1: s1, s3 too close to call "
        "at this host's spread (1.4% apart; 2 launches of each resolve 6.5% or more at 80%)"
    )
    # Assumed (the legend's) or measured by the sweep itself: no note.
    for facts in (judged(FIRST, launchprior.ASSUMED), judged([*FIRST, *SECOND], p)):
        step = race.table(facts)
        assert prior_note(step, step.index.to_numpy()) == ""
    assert json.loads(json.dumps(msgspec.to_builtins(p)))["df"] == 6
