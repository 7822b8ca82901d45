"""The host's launch spread from its history (analysis.running.prior): where it comes from, the
finalists it relaunches (only a close call), the one-launch verdicts it widens, and where it is
said and recorded (the plan's lines, each fact, the report's note)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from factories import config, fact, run
from test_record import run_payload
from test_sweep_plan import IDENTITY, ONE_LAUNCH_EACH, build, llama
from test_sweep_race import FIRST, SECOND, launch, write

from analysis.facts import record
from analysis.facts.schema import Engine, Fact
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
    # One launch each: s1 141 tok/s the best, s3 139 (1.4% behind), s2 90 (36% behind).
    small = known(2.0)
    step = race.table(judged(FIRST, small))
    assert prior.finalists(step, ["s1", "s2", "s3"], small) == ["s1", "s3"]
    # The report's own interval says the same: s2 is clearly slower at that spread, s3 within it.
    s2, s3 = (step[step["config"] == c].iloc[0] for c in ("s2", "s3"))
    assert s2["vs_best_ci_hi"] < 0 and bool(s3["tie_best"]), (s2["vs_best_ci_hi"], s3["tie_best"])
    assert race.raced_out(step, "s2") is not None


def test_a_clear_decision_at_a_known_spread_relaunches_nothing() -> None:
    small = known(2.0)
    clear = [FIRST[0], FIRST[1], FIRST[2]]  # baseline 100, s1 141, s2 90
    assert prior.finalists(race.table(judged(clear, small)), ["s1", "s2"], small) == []
    # The same measurements on a host whose history spread is wide: s2 may be the best after all.
    wide = known(30.0)
    assert prior.finalists(race.table(judged(clear, wide)), ["s1", "s2"], wide) == ["s1", "s2"]


def test_a_close_call_with_the_baseline_relaunches_the_config() -> None:
    small = known(2.0)
    close = [launch(None, [100, 101, 99]), launch(1, [99, 100, 98]), launch(2, [60, 61, 59])]
    # The baseline is the best and launched again at the end anyway; only s1 is a candidate.
    assert prior.finalists(race.table(judged(close, small)), ["s1", "s2"], small) == ["s1"]


def test_without_history_the_finalists_are_chosen_as_before() -> None:
    # The assumed 25%: the best and every config within noise of it (race.finalists' rule).
    step = race.table(judged(FIRST, launchprior.ASSUMED))
    assert prior.finalists(step, ["s1", "s2", "s3"], launchprior.ASSUMED) == ["s1", "s2", "s3"]
    assert prior.finalists(step, ["s1", "s2", "s3"], None) == race.finalists(step, ["s1", "s2", "s3"])
    # Facts without a recorded prior (older plans) are judged on the same assumed spread.
    assert race.table(FIRST)["vs_best_ci_lo"].equals(step["vs_best_ci_lo"])


def test_the_close_gap_grows_with_the_spread_and_its_uncertainty() -> None:
    # 1.96 x sqrt(2) x 2% on a known spread: 5.4% behind the best is still a close call.
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


# --------------------------------------------------------------------------------------
# Where it is said and recorded
# --------------------------------------------------------------------------------------


def gemma_sweep(results: Path) -> None:
    """An earlier llama.cpp sweep on h0 with the baseline launched twice."""
    engine = Engine(name="llama_cpp", model="/models/gemma.gguf", launcher="nohup")
    facts = [
        msgspec.structs.replace(fact(config(s), [run([t, t], repeat=r) for r in (1, 2, 3)], host="h0",
                                     sweep_id="old", engine=engine), launch_index=k)
        for s, t, k in ((None, 40.0, 1), (1, 36.0, 1), (None, 44.0, 2))
    ]  # fmt: skip
    write(results / "old" / "h0", *facts)
    (results / "old" / "sweep.json").write_text("{}")


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
    # The estimate counts one finalist where the spread is known, every one where it is assumed.
    assert built["sweep"]["estimate"]["launches_per_host"] == 3 + 1
    assert no_history["sweep"]["estimate"]["launches_per_host"] == 3 + 2
    # No finalists and no racing: nothing to say.
    quiet_request = request.read({**ONE_LAUNCH_EACH, "steps": "1,2"})
    quiet = plan.build(quiet_request, {"h0": llama()}, IDENTITY, tmp_path / "r", history)
    assert plan.priors(quiet["sweep"], quiet["hosts"]) == []


def test_each_fact_records_the_spread_and_the_report_names_it(tmp_path: Path) -> None:
    p = known(4.2, df=6)
    payload = outcome.payload(run_payload(launch_prior=msgspec.to_builtins(p)), None, [])
    assert record.build_fact(payload).launch_prior == p
    assert record.build_fact(outcome.payload(run_payload(), None, [])).launch_prior is None
    step = race.table(judged(FIRST, p))
    assert prior_note(step, step.index.to_numpy()) == (
        "one launch per config: verdicts allow a launch-to-launch CV of 4.2% "
        "(the host's earlier sweeps, 6 df)"
    )
    # Assumed (the legend's) or measured by the sweep itself: no note.
    for facts in (judged(FIRST, launchprior.ASSUMED), judged([*FIRST, *SECOND], p)):
        step = race.table(facts)
        assert prior_note(step, step.index.to_numpy()) == ""
    assert json.loads(json.dumps(msgspec.to_builtins(p)))["df"] == 6
