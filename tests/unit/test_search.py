"""The step-count search: its decisions on synthetic curves, its objective, its command line."""

from __future__ import annotations

import io
import itertools
import json
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from analysis import cli, objectives
from analysis.facts.schema import Fact
from analysis.report.sla import Sla
from analysis.search import decide as search_core
from analysis.search import levels, objective
from analysis.search import state as search_state
from analysis.search.decide import Decision, Probe, decide
from tests.unit import factories
from tests.unit.local_play import run_local_play

STEPS = list(range(1, 11))
Curve = list[float | None]  # objective by step 1..10; None: the launch fails


def strict_unimodal(n: int = 10, plateau: int = 1) -> list[list[float]]:
    """Every order type of a unimodal curve with a flat top `plateau` wide: the peak position and
    which of the other ranks lie left of it. A noiseless search only sees comparisons, so these
    are all the curves it can tell apart (512 for n = 10 without a plateau)."""
    shapes = []
    others = n - plateau
    for left_count in range(others + 1):
        for left in itertools.combinations(range(others), left_count):
            right = sorted(set(range(others)) - set(left), reverse=True)
            shapes.append([r + 1.0 for r in sorted(left)] + [100.0] * plateau + [r + 1.0 for r in right])
    return shapes


def measure(value: float | None, noise: float, rng: random.Random, repeats: int = 3) -> Probe:
    """What launching a config of true objective `value` yields: `repeats` noisy samples."""
    if value is None:
        return Probe(failed=True)
    return Probe(tuple(value * (1 + rng.gauss(0, noise)) for _ in range(repeats)))


def simulate(
    curve: Curve, parallel: int = 1, noise: float = 0.0, seed: int = 0
) -> tuple[Decision, list[list[int]]]:
    """Run the search to `done` in synchronous rounds; returns the decision and each round's probes."""
    rng = random.Random(seed)
    candidates = list(range(1, len(curve) + 1))
    observations: dict[int, Probe] = {}
    rounds: list[list[int]] = []
    while (d := decide(candidates, observations, set(), parallel)).action == "measure":
        rounds.append([p.steps for p in d.picks])
        for steps in rounds[-1]:
            assert steps not in observations, f"s{steps} measured twice"
            observations[steps] = measure(curve[steps - 1], noise, rng)
        assert len(rounds) <= len(candidates), "the search does not end"
    assert d.action == "done", d
    return d, rounds


def launches(rounds: list[list[int]]) -> int:
    return sum(map(len, rounds))


def optima(curve: Curve) -> set[int]:
    top = max(v for v in curve if v is not None)
    return {s for s, v in enumerate(curve, start=1) if v == top}


# --- noiseless: the Fibonacci guarantee, proven over every shape ------------------------------


def test_every_strict_unimodal_curve_is_solved_in_five_launches() -> None:
    shapes = strict_unimodal()
    assert len(shapes) == 512
    for curve in shapes:
        d, rounds = simulate(curve)
        assert d.best in optima(curve), (curve, d)
        assert launches(rounds) <= 5, (curve, rounds)
        assert d.sure, (curve, d)


def test_twelve_candidates_take_five_launches_the_fibonacci_bound() -> None:
    """Five comparisons separate at most F(7) - 1 = 12 points; a plain halving search needs six."""
    for curve in strict_unimodal(n=12)[::3]:
        d, rounds = simulate(curve)
        assert d.best in optima(curve)
        assert launches(rounds) <= 5, (curve, rounds)


@pytest.mark.parametrize("width", [2, 3])
def test_a_plateau_at_the_peak_is_found_in_five_launches(width: int) -> None:
    for curve in strict_unimodal(plateau=width):
        d, rounds = simulate(curve)
        assert d.best in optima(curve), (curve, d)
        assert launches(rounds) <= 5, (curve, rounds)


@pytest.mark.parametrize(
    ("curve", "best", "neighbour"),
    [([1.0 + s for s in range(10)], 10, 9), ([20.0 - s for s in range(10)], 1, 2)],
)
def test_monotone_curves_end_at_their_edge(curve: Curve, best: int, neighbour: int) -> None:
    d, rounds = simulate(curve)
    assert d.best == best
    assert launches(rounds) <= 5
    assert d.sure and d.confidence == f"sure: s{neighbour} clearly slower"


def test_failed_launches_rank_below_every_success() -> None:
    """OOM at high step counts: a failing tail after the peak still takes at most five launches."""
    for curve in strict_unimodal()[::7]:  # every peak position, a sample of shapes
        peak = curve.index(100.0)
        for first_failure in range(peak + 1, 10):
            failing: Curve = [*curve[:first_failure], *[None] * (10 - first_failure)]
            d, rounds = simulate(failing)
            assert d.best == peak + 1, (failing, d)
            assert launches(rounds) <= 5


def test_when_every_launch_fails_there_is_no_best() -> None:
    d, rounds = simulate([None] * 10)
    assert d.best is None and not d.sure
    assert d.confidence == "every probe failed"
    assert launches(rounds) <= 5


# --- several hosts: k probes a round -----------------------------------------------------------


@pytest.mark.parametrize(("parallel", "max_rounds"), [(2, 3), (3, 3), (4, 2)])
def test_parallel_search_probes_k_at_once_and_needs_fewer_rounds(parallel: int, max_rounds: int) -> None:
    for curve in strict_unimodal():
        d, rounds = simulate(curve, parallel=parallel)
        assert d.best in optima(curve)
        assert len(rounds) <= max_rounds, (curve, rounds)
        assert all(len(r) <= parallel for r in rounds)
        assert len(rounds[0]) == parallel  # the opening round uses every host


def test_a_pending_probe_of_the_current_plan_leaves_the_other_slots() -> None:
    opening = decide(STEPS, {}, set(), 2)
    first, second = (p.steps for p in opening.picks)
    d = decide(STEPS, {}, {first}, 2)
    assert d.action == "measure" and [p.steps for p in d.picks] == [second]


def test_a_pending_probe_still_planned_from_newer_results_leaves_the_other_slot() -> None:
    """s6 was launched with s5; s5's result keeps s6 in the plan, so the free host takes s4."""
    assert [p.steps for p in decide(STEPS, {}, set(), 2).picks] == [5, 6]
    d = decide(STEPS, {5: Probe((1.0, 1.0, 1.0))}, {6}, 2)
    assert d.action == "measure" and [p.steps for p in d.picks] == [4]


def test_a_pending_probe_the_plan_no_longer_holds_makes_the_others_wait() -> None:
    d = decide(STEPS, {5: Probe((1.0, 1.0, 1.0))}, {9}, 2)
    assert d.action == "wait"
    assert d.reason == "waiting for s9 (in flight): its result decides the next probe"


def test_when_every_planned_probe_is_in_flight_the_asker_waits() -> None:
    first = decide(STEPS, {}, set(), 1).picks[0].steps
    d = decide(STEPS, {}, {first}, 1)
    assert (d.action, d.reason) == ("wait", "every planned probe is in flight")


# --- noise ---------------------------------------------------------------------------------------


def realistic(rng: random.Random) -> list[float]:
    """A speedup curve: peak 1.8x somewhere, each step away 2-15% slower."""
    peak = rng.randrange(10)
    curve = [1.8] * 10
    for i in range(peak - 1, -1, -1):
        curve[i] = curve[i + 1] * (1 - rng.uniform(0.02, 0.15))
    for i in range(peak + 1, 10):
        curve[i] = curve[i - 1] * (1 - rng.uniform(0.02, 0.15))
    return curve


def test_noisy_curves_find_the_optimum_or_name_it_as_within_noise() -> None:
    rng = random.Random(6)
    trials = 200
    named = wrong_but_sure = 0
    for seed in range(trials):
        curve = realistic(rng)
        d, rounds = simulate(curve, noise=0.03, seed=seed)
        (best,) = optima(curve)
        named += d.best == best or best in d.close
        wrong_but_sure += d.sure and d.best != best
        assert launches(rounds) <= 10
    assert named >= 0.97 * trials
    assert wrong_but_sure <= 0.02 * trials


def probes(**by_steps: tuple[float, ...]) -> dict[int, Probe]:
    """Observations written as s4=(samples...)."""
    return {int(k[1:]): Probe(v) for k, v in by_steps.items()}


def test_neighbours_within_noise_make_the_answer_not_sure() -> None:
    observations = probes(
        s3=(0.80, 0.81, 0.79),
        s4=(0.99, 1.03, 0.97),
        s5=(1.01, 0.98, 1.04),
        s6=(0.97, 1.02, 1.0),
        s7=(0.7, 0.71, 0.69),
    )
    d = decide(STEPS, observations, set(), 1)
    assert d.action == "done" and d.best == 5 and not d.sure
    assert d.close == (4, 6)
    assert d.confidence == "within noise of s4, s6"


def test_a_neighbour_within_noise_does_not_close_the_bracket() -> None:
    """s6 might be the better one: the search probes past it instead of guessing s5."""
    observations = probes(s4=(0.80, 0.81, 0.79), s5=(1.01, 0.98, 1.04), s6=(0.99, 1.03, 0.97))
    d = decide(STEPS, observations, set(), 1)
    assert d.action == "measure"
    assert d.picks == (search_core.Pick(7, "s6 within noise of best so far s5: probing beyond it"),)


def test_clearly_slower_neighbours_make_the_answer_sure() -> None:
    observations = probes(s4=(0.80, 0.81, 0.79), s5=(1.01, 0.99, 1.0), s6=(0.90, 0.91, 0.89))
    d = decide(STEPS, observations, set(), 1)
    assert (d.action, d.best, d.sure) == ("done", 5, True)
    assert d.confidence == "sure: s4, s6 clearly slower"


def test_single_repeats_leave_the_noise_unknown() -> None:
    observations = {s: Probe((float(s),)) for s in (8, 9, 10)}
    d = decide(STEPS, observations, set(), 1)
    assert d.action == "done" and not d.sure
    assert d.confidence == "noise unknown (fewer than 2 repeats)"


def test_the_launch_budget_stops_the_search_honestly() -> None:
    flat = [1.0] * 10
    rng = random.Random(1)
    observations: dict[int, Probe] = {}
    while (d := decide(STEPS, observations, set(), 1, max_launches=3)).action == "measure":
        observations[d.picks[0].steps] = measure(flat[0], 0.03, rng)
    assert len(observations) == 3 and d.action == "done" and not d.sure
    assert "launch budget (3) spent before the bracket closed" in d.confidence


def test_within_noise_needs_two_repeats_and_counts_failures_as_decided() -> None:
    assert search_core.within_noise(Probe((1.0,)), Probe((2.0, 2.0))) is None
    assert search_core.within_noise(Probe((1.0, 1.0)), Probe((1.0, 1.0))) is False  # known exactly: a tie
    assert search_core.within_noise(Probe((1.0, 1.1, 0.9)), Probe((1.02, 0.95, 1.05))) is True
    assert search_core.within_noise(Probe((1.0, 1.01, 0.99)), Probe((1.5, 1.51, 1.49))) is False
    assert search_core.within_noise(Probe(failed=True), Probe((1.0, 1.0))) is False


def test_decide_rejects_bad_candidates() -> None:
    with pytest.raises(ValueError, match="distinct"):
        decide([1, 1, 2], {}, set(), 1)
    with pytest.raises(ValueError, match="distinct"):
        decide([], {}, set(), 1)
    with pytest.raises(ValueError, match="parallel"):
        decide([1, 2], {}, set(), 0)
    with pytest.raises(ValueError, match="samples"):
        Probe(())


# --- the objective -------------------------------------------------------------------------------


def test_objective_is_per_repeat_decode_tps_at_the_first_concurrency() -> None:
    runs = [
        factories.run([100.0, 110.0, 120.0], repeat=0),
        factories.run([90.0], repeat=1),
        factories.run([95.0], repeat=2, error="stream dropped"),  # an errored repeat gives no number
        factories.run([500.0], repeat=0, concurrency=8),
    ]
    fact = factories.fact(factories.config(4), runs)
    assert objective.decode_samples(fact) == [110.0, 90.0]
    assert objective.probe_of([fact], {"gpu-a": 100.0}) == Probe((1.1, 0.9))
    assert objective.probe_of([fact], None) == Probe((110.0, 90.0))
    crashed = factories.fact(factories.config(4), [], failure=factories.crash())
    assert objective.probe_of([crashed], None) == Probe(failed=True)


# --- the command line ----------------------------------------------------------------------------

SWEEP = "sweep-1"
REPO = Path(__file__).resolve().parents[2]
_clock = itertools.count(1)  # facts' start times: the order the search launched them


def candidates(profile: str = "default") -> list[dict]:
    return [{"id": factories.config(s, profile).id, "steps": s} for s in STEPS]


def write_fact(root: Path, host: str, steps: int | None, tps: float | None, profile: str = "default") -> None:
    """A fact of 3 repeats at `tps` (+-1%), a failed one for None; steps None is the baseline."""
    cfg = factories.config(steps, profile)
    started = float(next(_clock))
    if tps is None:
        fact = factories.fact(cfg, [], host=host, failure=factories.crash("oom"), started_at=started)
    else:
        runs = [factories.run([tps * f], repeat=i) for i, f in enumerate((0.99, 1.0, 1.01))]
        fact = factories.fact(cfg, runs, host=host, started_at=started)
    factories.write_sweep(root, [fact])


Ask = Callable[..., dict]


@pytest.fixture
def ask(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Ask:
    """Call `next` in-process as the playbook would; returns its JSON line."""

    def call(
        host: str, scope: str, parallel: int = 1, run_id: str = "run-1", cands: list | None = None
    ) -> dict:
        monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(cands or candidates())))
        argv = ["next", "--sweep-dir", str(tmp_path / SWEEP), "--host", host, "--run-id", run_id]
        code = cli.main(["search", *argv, "--scope", scope, "--parallel", str(parallel)])
        out = capsys.readouterr().out
        assert code == 0, out
        return json.loads(out)

    (tmp_path / SWEEP).mkdir()
    return call


SPEEDUP = [1.1, 1.3, 1.5, 1.6, 1.7, 1.75, 1.8, 1.6, 1.4, None]  # best s7; s10 runs out of memory


def test_replicate_mode_searches_each_host_on_its_own_facts(ask: Ask, tmp_path: Path) -> None:
    root = tmp_path / SWEEP
    write_fact(tmp_path, "gpu-a", None, 100.0)
    write_fact(tmp_path, "gpu-b", 4, 1000.0)  # another host's fact: not this host's search
    answers = []
    while (answer := ask("gpu-a", "host"))["action"] == "measure":
        answers.append(answer)
        steps = int(answer["config_id"][1:])
        speedup = SPEEDUP[steps - 1]
        write_fact(tmp_path, "gpu-a", steps, None if speedup is None else 100.0 * speedup)
    assert answer == {"action": "done", "best": "s7", "reason": answer["reason"]}
    assert answer["reason"].startswith(f"search finished after {len(answers)} launches: best s7, sure")
    assert len(answers) <= 5
    assert answers[0] == {
        "action": "measure",
        "config_id": "s4",
        "reason": "first Fibonacci probe over s1..s10",
    }
    for a in answers:
        note = json.loads((root / ".claims" / "run-1" / "gpu-a" / a["config_id"] / "claim.json").read_text())
        assert (note["host"], note["reason"]) == ("gpu-a", a["reason"])
    state = json.loads((root / "search-gpu-a.json").read_text())
    assert (state["done"], state["best"], state["sure"], state["scope"]) == (True, "s7", True, "host")
    assert state["unit"] == "throughput / host baseline"
    assert [p["id"] for p in state["probes"]] == [a["config_id"] for a in answers]
    assert [p["reason"] for p in state["probes"]] == [a["reason"] for a in answers]
    assert state["observations"]["s7"]["median"] == pytest.approx(1.8)
    assert state["observations"]["s7"]["ci"][0] < 1.8 < state["observations"]["s7"]["ci"][1]
    assert not (root / "search.json").exists()
    summary = search_state.render_summary(root)
    assert summary.startswith(
        "search over steps 1..10 on gpu-a: best s7 (sure: s6, s8 clearly slower); measured s4 ("
    )


def test_shard_mode_shares_probes_and_compares_hosts_by_their_baselines(ask: Ask, tmp_path: Path) -> None:
    """gpu-b is twice as fast: raw tok/s would make whatever it measured look best."""
    root = tmp_path / SWEEP
    speed = {"gpu-a": 100.0, "gpu-b": 200.0}
    for host, tps in speed.items():
        write_fact(tmp_path, host, None, tps)
    rounds = 0
    while (answers := {host: ask(host, "all", 2) for host in speed})["gpu-a"]["action"] != "done":
        rounds += 1
        launched = {host: a["config_id"] for host, a in answers.items() if a["action"] == "measure"}
        assert "gpu-a" in launched and len(set(launched.values())) == len(launched)
        assert ask("gpu-c", "all", 2)["action"] == "wait"  # a third host: the round is all in flight
        for host, config_id in launched.items():
            steps = int(config_id[1:])
            speedup = SPEEDUP[steps - 1]
            write_fact(tmp_path, host, steps, None if speedup is None else speed[host] * speedup)
    assert answers["gpu-a"]["best"] == answers["gpu-b"]["best"] == "s7"
    assert rounds <= 3
    state = json.loads((root / "search.json").read_text())
    assert state["unit"] == "throughput / host baseline" and state["done"]
    assert all(p["state"] == "measured" and len(p["hosts"]) == 1 for p in state["probes"])


def test_a_claim_of_another_host_is_pending_until_its_fact_arrives(ask: Ask, tmp_path: Path) -> None:
    claim = tmp_path / SWEEP / ".claims" / "run-1" / "s9"
    claim.mkdir(parents=True)
    (claim / "claim.json").write_text(
        json.dumps({"host": "gpu-b", "reason": "an older plan", "claimed_at": 1.0})
    )
    answer = ask("gpu-a", "all", 2)
    assert answer == {
        "action": "wait",
        "reason": "waiting for s9 (in flight): its result decides the next probe",
    }
    state = json.loads((tmp_path / SWEEP / "search.json").read_text())
    assert (state["pending"], state["done"], state["action"]) == (["s9"], False, "wait")
    assert state["probes"] == [
        {"id": "s9", "steps": 9, "state": "in flight", "hosts": [], "reason": "an older plan"}
    ]
    write_fact(tmp_path, "gpu-b", 9, 100.0)
    assert ask("gpu-a", "all", 2)["action"] == "measure"


def test_a_hosts_own_claim_without_a_fact_is_offered_to_it_again(ask: Ask) -> None:
    first = ask("gpu-a", "all")
    assert ask("gpu-a", "all") == first  # it asked again: that probe left no fact
    assert ask("gpu-b", "all")["action"] == "wait"


def test_a_claim_lost_to_another_host_means_wait(
    ask: Ask, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two hosts decided at the same time; the other one's mkdir came first."""
    claims = tmp_path / SWEEP / ".claims" / "run-1"
    (claims / "s4").mkdir(parents=True)
    (claims / "s4" / "claim.json").write_text(json.dumps({"host": "gpu-b"}))
    monkeypatch.setattr(search_state, "pending_ids", lambda *_: set())  # it did not see the claim yet
    assert ask("gpu-a", "all") == {
        "action": "wait",
        "reason": "every planned probe was just claimed by another host",
    }


def test_an_env_profile_uses_its_own_baseline_and_state_file(ask: Ask, tmp_path: Path) -> None:
    write_fact(tmp_path, "gpu-a", None, 100.0, profile="fast")
    write_fact(tmp_path, "gpu-a", 4, 150.0, profile="fast")
    answer = ask("gpu-a", "all", cands=candidates("fast"))
    assert answer["action"] == "measure" and answer["config_id"].endswith("+fast")
    state = json.loads((tmp_path / SWEEP / "search+fast.json").read_text())
    assert state["profile"] == "fast" and state["observations"]["s4+fast"]["median"] == pytest.approx(1.5)
    assert state["probes"][0]["reason"] == "measured before the search asked (existing fact)"


def test_without_a_baseline_the_objective_is_raw_tps(ask: Ask, tmp_path: Path) -> None:
    write_fact(tmp_path, "gpu-a", 4, 150.0)
    ask("gpu-a", "host")
    state = json.loads((tmp_path / SWEEP / "search-gpu-a.json").read_text())
    assert state["unit"] == "throughput" and state["observations"]["s4"]["median"] == pytest.approx(150.0)


def goodput_fact(root: Path, steps: int, tps: list[float]) -> None:
    """A fact of 3 repeats, each of requests at these tok/s (+-1%), 128 tokens after a 0.5 s TTFT."""
    runs = [factories.run([t * f for t in tps], repeat=i) for i, f in enumerate((0.99, 1.0, 1.01))]
    factories.write_sweep(root, [factories.fact(factories.config(steps), runs, host="gpu-a")])


def search_next(tmp_path: Path, cands: list[dict], *options: str) -> tuple[int, str, str]:
    """`search next` for gpu-a with these options: (exit code, stdout, stderr)."""
    argv = ["--sweep-dir", str(tmp_path / SWEEP), "--host", "gpu-a", "--run-id", "run-1", "--scope", "host"]
    done = subprocess.run(
        [sys.executable, "-m", "analysis", "search", "next", *argv, *options],
        input=json.dumps(cands), capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def test_the_search_judges_goodput_on_the_sweeps_slos(tmp_path: Path) -> None:
    # s1: two requests at 100 tok/s (TPOT 10 ms), 100 tok/s in all. s2: one at 200 (5 ms), one at
    # 50 (20 ms), 125 tok/s in all: the faster in tokens, but one request of two within 15 ms.
    goodput_fact(tmp_path, 1, [100.0, 100.0])
    goodput_fact(tmp_path, 2, [200.0, 50.0])
    cands = [{"id": factories.config(s).id, "steps": s} for s in (1, 2)]
    fact = search_state._load(tmp_path / SWEEP / "gpu-a" / "s2.json")
    assert fact is not None
    slo = Sla(itl_p99_ms=15.0)
    # Goodput per repeat: the requests within the SLO over the run's window (2 x 128 / 125 s).
    assert objective.decode_samples(fact, objective=objectives.GOODPUT, sla=slo) == pytest.approx(
        [1 / (256 / (125 * f)) for f in (0.99, 1.0, 1.01)]
    )
    code, out, err = search_next(tmp_path, cands)
    assert code == 0 and json.loads(out)["best"] == "s2", out + err  # throughput
    code, out, err = search_next(tmp_path, cands, "--objective", "goodput", "--sla-itl-p99-ms", "15")
    answer = json.loads(out)
    assert code == 0 and (answer["action"], answer["best"]) == ("done", "s1"), out + err
    state = json.loads((tmp_path / SWEEP / "search-gpu-a.json").read_text())
    assert state["unit"] == "goodput" and state["observations"]["s1"]["median"] == pytest.approx(2 / 2.56)


def test_a_search_on_goodput_without_an_slo_is_refused_naming_the_settings(tmp_path: Path) -> None:
    (tmp_path / SWEEP).mkdir()
    code, out, err = search_next(tmp_path, candidates(), "--objective", "goodput")
    assert (code, out) == (2, ""), err
    assert err.strip() == (
        "analysis search: objective: goodput counts requests within the SLOs; set sla_ttft_p99_ms or "
        "sla_itl_p99_ms (--sla-ttft-p99-ms / --sla-itl-p99-ms)"
    )
    assert not list((tmp_path / SWEEP).iterdir())  # nothing claimed or written


def test_the_module_runs_as_a_command_without_pandas(tmp_path: Path) -> None:
    """The playbook runs it once per probe: a fresh interpreter that must not pay for pandas."""
    (tmp_path / SWEEP).mkdir()
    argv = [
        "next",
        "--sweep-dir",
        str(tmp_path / SWEEP),
        "--host",
        "gpu-a",
        "--run-id",
        "r",
        "--scope",
        "host",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "analysis", "search", *argv],
        input=json.dumps(candidates()),
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    assert json.loads(done.stdout)["action"] == "measure"
    probe = "import sys, analysis.search; print([m for m in ('numpy', 'pandas') if m in sys.modules])"
    imported = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert imported.stdout.strip() == "[]"


class Unreadable(io.StringIO):
    def read(self, *_: object) -> str:
        raise OSError("stdin is closed")


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        (io.StringIO("[]"), "non-empty JSON list"),
        (io.StringIO("not json"), "not JSON"),
        (Unreadable(), "cannot read candidates from stdin: stdin is closed"),
        (
            io.StringIO('[{"id": "s1", "steps": 1}, {"id": "s2", "steps": 1}]'),
            "duplicate candidate steps: [1]",
        ),
        (
            io.StringIO('[{"id": "s1", "steps": 1}, {"id": "s1", "steps": 2}]'),
            "duplicate candidate id: ['s1']",
        ),
        (io.StringIO('[{"id": "s1", "steps": true}]'), "each candidate must be"),
        (io.StringIO('[{"id": "s1", "steps": 1}, {"id": "s2+fast", "steps": 2}]'), "mix env profiles"),
    ],
)
def test_bad_input_exits_2_with_a_message(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    stdin: io.StringIO,
    message: str,
) -> None:
    (tmp_path / SWEEP).mkdir()
    monkeypatch.setattr(sys, "stdin", stdin)
    argv = [
        "next",
        "--sweep-dir",
        str(tmp_path / SWEEP),
        "--host",
        "gpu-a",
        "--run-id",
        "r",
        "--scope",
        "host",
    ]
    assert cli.main(["search", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("analysis search: ") and message in err
    assert not list((tmp_path / SWEEP).iterdir())  # nothing claimed, no state written


def test_render_summary_is_empty_without_a_search(tmp_path: Path) -> None:
    assert search_state.render_summary(tmp_path) == ""


def test_t_quantiles_match_the_table_and_interpolate_between() -> None:
    assert search_core.t975(4) == pytest.approx(2.7764)
    assert search_core.t975(1e9) == pytest.approx(1.96, abs=1e-6)
    assert 3.1824 < search_core.t975(2.5) < 4.3027


# --- several concurrency levels: one launch measures every level ---------------------------------

LEVELS = [1, 4, 16]
EIGHT = list(range(1, 9))


def shaped(peak: int, rng: random.Random, n: int = 8) -> list[float]:
    """A speedup curve over steps 1..n peaking at step peak + 1, each step away 2-15% slower."""
    curve = [1.8] * n
    for i in range(peak - 1, -1, -1):
        curve[i] = curve[i + 1] * (1 - rng.uniform(0.02, 0.15))
    for i in range(peak + 1, n):
        curve[i] = curve[i - 1] * (1 - rng.uniform(0.02, 0.15))
    return curve


def simulate_levels(
    curves: dict[int, Curve], parallel: int = 1, noise: float = 0.0, seed: int = 0
) -> tuple[levels.LevelsDecision, list[list[int]]]:
    """Run the multi-level search to done; every launch gives a probe at every level."""
    rng = random.Random(seed)
    candidates = list(range(1, len(next(iter(curves.values()))) + 1))
    observations: dict[int, dict[int, Probe]] = {c: {} for c in curves}
    rounds: list[list[int]] = []
    while (
        d := levels.decide_levels(candidates, list(curves), observations, set(), parallel)
    ).action == "measure":
        rounds.append([p.steps for p in d.picks])
        for steps in rounds[-1]:
            assert steps not in observations[next(iter(curves))], f"s{steps} launched twice"
            for c, curve in curves.items():
                observations[c][steps] = measure(curve[steps - 1], noise, rng)
        assert len(rounds) <= len(candidates), "the search does not end"
    assert d.action == "done", d
    return d, rounds


def test_one_level_places_probes_exactly_as_the_single_level_search() -> None:
    """The joint minimax over one bracket is decide's: same probes, same count, on every shape."""
    for curve in strict_unimodal():
        single, single_rounds = simulate(curve)
        joint, joint_rounds = simulate_levels({1: curve})
        assert joint_rounds == single_rounds, curve
        assert joint.levels[1].best == single.best and joint.levels[1].sure


@pytest.mark.parametrize("parallel", [1, 2])
def test_every_placement_of_three_peaks_is_found_and_each_launch_serves_every_level(parallel: int) -> None:
    """All 8^3 peak positions (shapes drawn at random): each level named exactly and sure, no step
    launched twice, and never more launches than the full grid of 8."""
    rng = random.Random(3)
    worst = 0
    for peaks in itertools.product(range(8), repeat=3):
        curves = {c: shaped(p, rng) for c, p in zip(LEVELS, peaks, strict=True)}
        d, rounds = simulate_levels(curves, parallel)
        assert [d.levels[c].best for c in LEVELS] == [p + 1 for p in peaks], (peaks, d)
        assert all(d.levels[c].sure for c in LEVELS), d
        worst = max(worst, launches(rounds))
    assert worst <= 8


def moving(rng: random.Random) -> dict[int, Curve]:
    """The optimum falls with load: steps 3..8 at concurrency 1, 0-1 lower at 4, 0-2 lower at 16."""
    p1 = rng.randrange(2, 8)
    p4 = max(p1 - rng.randint(0, 1), 0)
    p16 = max(p4 - rng.randint(0, 2), 0)
    return {c: shaped(p, rng) for c, p in zip(LEVELS, (p1, p4, p16), strict=True)}


def test_an_optimum_that_moves_with_load_takes_five_launches_typically_and_seven_at_most() -> None:
    rng = random.Random(11)
    counts = []
    for _ in range(200):
        curves = moving(rng)
        d, rounds = simulate_levels(curves)
        assert all(d.levels[c].best in optima(curve) for c, curve in curves.items())
        counts.append(launches(rounds))
    assert sorted(counts)[len(counts) // 2] <= 5  # the median
    assert max(counts) <= 7
    assert sum(n <= 6 for n in counts) >= 0.95 * len(counts)


def test_at_three_percent_noise_each_levels_optimum_is_named_or_within_noise() -> None:
    rng = random.Random(12)
    named = wrong_but_sure = total = 0
    for seed in range(100):
        curves = moving(rng)
        d, rounds = simulate_levels(curves, noise=0.03, seed=seed)
        assert launches(rounds) <= 8
        for c, curve in curves.items():
            (best,) = optima(curve)
            answer = d.levels[c]
            named += answer.best == best or best in answer.close
            wrong_but_sure += answer.sure and answer.best != best
            total += 1
    assert named >= 0.95 * total
    assert wrong_but_sure <= 0.02 * total


def test_a_probe_inside_two_brackets_serves_both() -> None:
    """c1 peaks near s6, c16 near s3: after s3 and s6 both brackets hold s4..s5, one probe for both."""
    observations = {
        1: probes(s3=(1.2, 1.2, 1.2), s6=(1.5, 1.5, 1.5)),
        16: probes(s3=(1.3, 1.3, 1.3), s6=(1.1, 1.1, 1.1)),
    }
    d = levels.decide_levels(EIGHT, [1, 16], observations, set(), 1)
    assert d.action == "measure" and len(d.picks) == 1
    (pick,) = d.picks
    assert pick.steps in (4, 5)
    assert "c1 (" in pick.reason and "c16 (" in pick.reason
    assert (d.levels[1].best, d.levels[16].best) == (6, 3)
    assert (d.levels[1].action, d.levels[16].action) == ("measure", "measure")


def test_a_settled_level_reports_done_while_another_still_searches() -> None:
    settled = probes(s2=(1.0, 1.0, 1.0), s3=(1.4, 1.4, 1.4), s4=(1.1, 1.1, 1.1), s8=(0.9, 0.9, 0.9))
    rising = probes(s2=(1.0, 1.0, 1.0), s3=(1.1, 1.1, 1.1), s4=(1.2, 1.2, 1.2), s8=(1.3, 1.3, 1.3))
    d = levels.decide_levels(EIGHT, [1, 4], {1: rising, 4: settled}, set(), 1)
    assert d.action == "measure" and d.picks[0].steps in (5, 6, 7)
    assert (d.levels[4].action, d.levels[4].best, d.levels[4].sure) == ("done", 3, True)
    assert d.levels[4].confidence == "sure: s2, s4 clearly slower"
    assert (d.levels[1].action, d.levels[1].best) == ("measure", 8)


def test_a_neighbour_within_noise_at_one_level_probes_beyond_it() -> None:
    """Both brackets closed, but at c4 s6 is within noise of s5: the search looks at s7."""
    exact = probes(s4=(1.0, 1.0, 1.0), s5=(1.5, 1.5, 1.5), s6=(1.2, 1.2, 1.2))
    noisy = probes(s4=(0.80, 0.81, 0.79), s5=(1.01, 0.98, 1.04), s6=(0.99, 1.03, 0.97))
    d = levels.decide_levels(EIGHT, [1, 4], {1: exact, 4: noisy}, set(), 1)
    assert d.action == "measure"
    assert d.picks == (
        search_core.Pick(7, "a neighbour within noise of the best at 1 level(s): probing beyond it"),
    )


def test_levels_pending_probes_wait_as_the_single_level_search_does() -> None:
    first = levels.decide_levels(EIGHT, LEVELS, {}, set(), 1).picks[0].steps
    d = levels.decide_levels(EIGHT, LEVELS, {}, {first}, 1)
    assert (d.action, d.reason) == ("wait", "every planned probe is in flight")
    measured = {c: {first: Probe((1.0, 1.0))} for c in LEVELS}
    planned = [p.steps for p in levels.decide_levels(EIGHT, LEVELS, measured, set(), 2).picks]
    assert len(planned) == 2
    stale = next(s for s in EIGHT if s != first and s not in planned)
    d = levels.decide_levels(EIGHT, LEVELS, measured, {stale}, 2)
    assert (d.action, d.reason) == (
        "wait",
        f"waiting for s{stale} (in flight): its result decides the next probe",
    )
    d = levels.decide_levels(EIGHT, LEVELS, measured, {planned[0]}, 2)
    assert d.action == "measure" and [p.steps for p in d.picks] == planned[1:]


def test_levels_stop_at_the_launch_budget_and_say_so() -> None:
    rng = random.Random(2)
    observations: dict[int, dict[int, Probe]] = {c: {} for c in LEVELS}
    while (
        d := levels.decide_levels(EIGHT, LEVELS, observations, set(), 1, max_launches=2)
    ).action == "measure":
        for c in LEVELS:
            observations[c][d.picks[0].steps] = measure(1.0, 0.03, rng)
    assert d.action == "done" and len(observations[1]) == 2
    assert all("launch budget (2) spent" in d.levels[c].confidence for c in LEVELS)
    assert d.reason.startswith("search finished after 2 launches: c1: s")


def test_decide_levels_rejects_bad_levels() -> None:
    with pytest.raises(ValueError, match="levels"):
        levels.decide_levels(EIGHT, [], {}, set(), 1)
    with pytest.raises(ValueError, match="levels"):
        levels.decide_levels(EIGHT, [4, 4], {}, set(), 1)
    with pytest.raises(ValueError, match="distinct"):
        levels.decide_levels([1, 1], [1], {}, set(), 1)


def test_objective_gives_samples_and_probes_at_every_level() -> None:
    runs = [
        factories.run([100.0], repeat=0, concurrency=1),
        factories.run([90.0], repeat=1, concurrency=1),
        factories.run([60.0, 70.0, 80.0], repeat=0, concurrency=8),
        factories.run([50.0], repeat=1, concurrency=8, error="stream dropped"),
    ]
    fact = msgspec.structs.replace(
        factories.fact(factories.config(4), runs),
        benchmark=msgspec.structs.replace(
            factories.fact(factories.config(4), []).benchmark, concurrency=[1, 8]
        ),
    )
    assert objective.level_samples(fact) == {1: [100.0, 90.0], 8: [70.0]}
    assert objective.decode_samples(fact, 8) == [70.0]
    assert objective.decode_samples(fact) == [100.0, 90.0]
    found = objective.level_probes([fact], [1, 8], {1: {"gpu-a": 100.0}, 8: {"gpu-a": 50.0}})
    assert found == {1: Probe((1.0, 0.9)), 8: Probe((1.4,))}
    crashed = factories.fact(factories.config(4), [], failure=factories.crash())
    assert objective.level_probes([crashed], [1, 8], None) == {1: Probe(failed=True), 8: Probe(failed=True)}


def test_state_observes_every_level_over_each_hosts_baseline_at_that_level(tmp_path: Path) -> None:
    root = tmp_path / SWEEP
    for steps, tps in ((None, {1: 100.0, 4: 50.0}), (2, {1: 150.0, 4: 55.0})):
        runs = [
            factories.run([tps[c] * f], repeat=i, concurrency=c)
            for c in (1, 4)
            for i, f in enumerate((0.99, 1.0, 1.01))
        ]
        factories.write_sweep(tmp_path, [factories.fact(factories.config(steps), runs)])
    asker = search_state.Asker(root, "gpu-a", "run-1", "host", "")
    observed = search_state.observe(asker, search_state.parse_candidates(json.dumps(candidates())))
    assert observed.level_unit == "throughput / host baseline"
    assert sorted(observed.levels) == [1, 4]
    assert observed.levels[1]["s2"].median == pytest.approx(1.5)
    assert observed.levels[4]["s2"].median == pytest.approx(1.1)
    assert observed.probes["s2"].median == pytest.approx(1.5)  # the single-level view: first level


def test_a_launch_missing_at_one_level_counts_as_failed_there_and_is_never_relaunched() -> None:
    observations = {1: probes(s4=(1.0, 1.0, 1.0)), 4: {}}
    d = levels.decide_levels(EIGHT, [1, 4], observations, set(), 1)
    assert d.action == "measure" and d.picks[0].steps != 4
    assert d.levels[4].best is None and d.levels[4].confidence == "every probe failed"


def workload_fact(steps: int | None, tps: dict[str, float], repeats: int = 3) -> Fact:
    """A fact that measured each workload at c = 1, `repeats` times, at its tok/s (+-1%)."""
    runs = [
        factories.run([rate * (0.99 + 0.01 * i)], repeat=i, concurrency=1, workload=w)
        for w, rate in tps.items()
        for i in range(repeats)
    ]
    return factories.fact(factories.config(steps), runs)


def mix_facts(host: str = "gpu-a") -> list[Fact]:
    """s2 loses on chat and wins big on code; s4 gains a little on both. Pooled, s2's samples have
    the higher median (120 against 105) and equal shares name s2 too (112.5 against 105 tok/s),
    whatever the traffic is: only a reader of the mix names s4 for chat-heavy traffic."""
    speeds = {None: (100.0, 100.0), 2: (90.0, 150.0), 4: (105.0, 105.0)}
    facts = [workload_fact(s, {"chat": chat, "code": code}) for s, (chat, code) in speeds.items()]
    return [msgspec.structs.replace(f, host=host) for f in facts]


MIX_CASES = pytest.mark.parametrize(
    ("shares", "best"), [({"chat": 0.9, "code": 0.1}, "s4"), ({"chat": 0.1, "code": 0.9}, "s2")]
)


def test_a_launch_of_several_workloads_is_judged_on_the_mix_per_repeat() -> None:
    fact = workload_fact(2, {"chat": 90.0, "code": 150.0})
    shares = {"chat": 0.7, "code": 0.3}
    got = objective.level_samples(fact, shares)[1]
    expected = [1 / (0.7 / (90 * f) + 0.3 / (150 * f)) for f in (0.99, 1.0, 1.01)]
    assert got == pytest.approx(expected)
    even = objective.level_samples(fact)[1]  # no mix given: equal shares of those measured
    assert even[1] == pytest.approx(1 / (0.5 / 90 + 0.5 / 150))
    # A repeat missing one of the mix's workloads gives no sample (it measured only part of it).
    short = msgspec.structs.replace(
        fact, runs=[r for r in fact.runs if (r.workload, r.repeat) != ("code", 2)]
    )
    assert len(objective.level_samples(short, shares)[1]) == 2


@MIX_CASES
def test_the_search_optimises_the_operators_mix_not_the_pooled_workloads(
    tmp_path: Path, shares: dict[str, float], best: str
) -> None:
    factories.write_sweep(tmp_path, mix_facts())
    asker = search_state.Asker(tmp_path / SWEEP, "gpu-a", "run-1", "host", "", mix=shares)
    observed = search_state.observe(asker, search_state.parse_candidates(json.dumps(candidates())))
    assert max(["s2", "s4"], key=lambda cid: observed.probes[cid].median) == best
    assert observed.unit == "throughput / host baseline"  # the baseline judged on the same mix
    assert observed.probes["s4"].median == pytest.approx(1.05)


@MIX_CASES
def test_the_sweeps_search_judges_probes_on_the_mix_its_plan_recorded(
    tmp_path: Path, shares: dict[str, float], best: str
) -> None:
    # A plugin that left settings.mix unread answers s2 for the chat-heavy mix too.
    sweep = factories.write_sweep(tmp_path, mix_facts("localhost"))
    entries = [factories.entry(factories.config(s), searched=True) for s in (2, 4)]
    plan = {
        "sweep": {
            "hosts": ["localhost"],
            "settings": {"mode": "replicate", "mix": shares, "concurrency": [1]},
        },
        "hosts": {"localhost": factories.host_plan(entries)},
    }
    where = {"dir": str(sweep), "host": "localhost", "run_id": "run-1"}
    proc = run_local_play(tmp_path, [
        {"specsweep_search": {"where": where, "profile": "default"}, "vars": {"specsweep_plan": plan},
         "register": "answer"},
        {"ansible.builtin.assert": {"that": ["answer.action == 'done'", f"answer.best == '{best}'"]}},
    ])  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert json.loads((sweep / "search-localhost.json").read_text())["mix"] == shares


@pytest.mark.parametrize(("given", "best"), [("chat=0.9,code=0.1", "s4"), ("chat=0.1,code=0.9", "s2")])
def test_search_next_takes_the_mix_on_its_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, given: str, best: str
) -> None:
    factories.write_sweep(tmp_path, mix_facts())
    monkeypatch.setattr(
        sys, "stdin", io.StringIO(json.dumps([{"id": "s2", "steps": 2}, {"id": "s4", "steps": 4}]))
    )
    argv = [
        "next",
        "--sweep-dir",
        str(tmp_path / SWEEP),
        "--host",
        "gpu-a",
        "--run-id",
        "r",
        "--scope",
        "host",
    ]
    assert cli.main(["search", *argv, "--mix", given]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert (answer["action"], answer["best"]) == ("done", best), answer
    assert f"search over steps 2, 4 on gpu-a on the mix {given}: best {best}" in search_state.render_summary(
        tmp_path / SWEEP
    )
    with pytest.raises(SystemExit):  # argparse's usage error, exit 2
        cli.main(["search", *argv, "--mix", "chat=0"])
    assert "each share above 0" in capsys.readouterr().err
