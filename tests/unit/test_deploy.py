"""deploy.yml's rules: the config and production argv per host, the gate, and what runs where."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import jinja2
import pytest
from factories import config, crash, entry, fact, host_plan, plan_sweep, relaunched, run, server, write_sweep
from local_play import run_local_play
from plugin_loader import REPO, load_plugin

from analysis import cli
from analysis.deploy import gate
from analysis.deploy.choice import DeployError, HostInput, argv_hash, choose, with_port
from analysis.deploy.deployed import deployed_configs
from analysis.deployments import latest, moved, record, row
from analysis.facts.load import load_sweeps
from analysis.facts.schema import to_dict
from analysis.nightly import history
from analysis.nightly import request as nightly
from analysis.redact import REDACTED
from analysis.sweep import request as sweep_request

ARGV = ["python", "-m", "sglang.launch_server", "--host", "0.0.0.0", "--port", "30000", "--api-key", REDACTED]


def plan(sweep: Path, hosts: list[str], configs: list[str], **settings: Any) -> None:
    """A plan.json as the sweep writes it: each host's launches, secrets redacted (settings: the
    sweep's, besides those every test here shares)."""
    served = server(engine="sglang", model="Kimi-K2.5", host="0.0.0.0", port=30000, url="http://0.0.0.0:30000",
                    health_timeout_s=1800.0, api_key=REDACTED, python="/opt/sglang/bin/python")  # fmt: skip
    entries = [
        entry(config(None if c == "baseline" else int(c[1:])), [*ARGV, "--id", c], {"NCCL_PROTO": "LL"})
        for c in configs
    ]
    doc = {
        "schema_version": 2,
        "sweep": plan_sweep(sweep.name, max_tokens=128, warmup=1, seed=7, **settings),
        "hosts": {h: host_plan(entries, engine="sglang", role="sglang_server", server=served) for h in hosts},
    }
    (sweep / "plan.json").write_text(json.dumps(doc), encoding="utf-8")


def measured(cfg, values, host, accept=None, failure=None):
    """A fact of one config on one host: one single-request run per value (and accept length)."""
    accepts = accept or [None] * len(values)
    runs = [run([v], repeat=i, accept_length=a) for i, (v, a) in enumerate(zip(values, accepts, strict=True))]
    return fact(cfg, [] if failure else runs, host=host, failure=failure)


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    """gpu-a: s3 clearly faster than the baseline; gpu-b: s3 within noise (the baseline is the answer);
    s5 crashed on both."""
    facts = [
        measured(config(None), [100, 101, 99], "gpu-a"),
        measured(config(3), [150, 152, 148], "gpu-a", accept=[2.5, 2.6, 2.4]),
        measured(config(None), [100, 101, 99], "gpu-b"),
        measured(config(3), [100, 130, 80], "gpu-b", accept=[2.5, 2.5, 2.5]),
        measured(config(5), [], "gpu-a", failure=crash()),
        measured(config(5), [], "gpu-b", failure=crash()),
    ]
    root = write_sweep(tmp_path, relaunched(facts))
    plan(root, ["gpu-a", "gpu-b"], ["baseline", "s3", "s5"])
    return root


HOSTS = [HostInput("gpu-a", 8000, "key-a"), HostInput("gpu-b", 8000, "key-b")]


def test_with_port_replaces_either_spelling_and_refuses_an_argv_without_one() -> None:
    assert with_port(["srv", "--port", "30000", "-c", "1"], 8000) == ["srv", "--port", "8000", "-c", "1"]
    assert with_port(["srv", "--port=30000"], 8000) == ["srv", "--port=8000"]
    with pytest.raises(DeployError, match="no --port"):
        with_port(["srv", "-p", "1"], 8000)


def test_each_host_gets_its_recommended_config_with_the_measured_argv_on_the_production_port(
    sweep: Path,
) -> None:
    targets = choose(sweep, HOSTS)
    assert targets["gpu-a"]["config"] == "s3"
    assert targets["gpu-b"]["config"] == "baseline"  # s3 within noise of it there
    a = targets["gpu-a"]
    assert a["argv"] == ["python", "-m", "sglang.launch_server", "--host", "0.0.0.0", "--port", "8000",
                         "--api-key", "key-a", "--id", "s3"]  # fmt: skip
    assert a["env"] == {"NCCL_PROTO": "LL"}
    assert a["url"] == "http://0.0.0.0:8000" and a["concurrency"] == 1
    # The hash is of the redacted launch: the same on every host, no secret in it.
    assert a["argv_sha256"] == argv_hash(with_port([*ARGV, "--id", "s3"], 8000), {"NCCL_PROTO": "LL"})
    assert a["sweep"]["tok_s"] == pytest.approx(150.0)
    assert 140 < a["sweep"]["tok_s_ci_lo"] < 150 < a["sweep"]["tok_s_ci_hi"]
    assert a["sweep"]["accept_ci_lo"] < 2.5 < a["sweep"]["accept_ci_hi"]
    assert a["benchmark"] == {"max_tokens": 128, "warmup": 1, "concurrency": 1, "records": "", "seed": 7}


def test_a_named_config_is_taken_when_it_completed_on_every_host(sweep: Path) -> None:
    targets = choose(sweep, HOSTS, config="s3")
    assert {t["config"] for t in targets.values()} == {"s3"}
    assert targets["gpu-b"]["why"] == "named with -e config"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"config": "s9"}, "config: s9 was not measured on gpu-a"),
        ({"config": "s5"}, "config: s5 did not complete every repeat on gpu-a"),
        ({"concurrency": 4}, "concurrency: 4 was not measured by sweep sweep-1 .measured: 1."),
    ],
)
def test_bad_input_is_refused_with_one_sentence(sweep: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(DeployError, match=message):
        choose(sweep, HOSTS, **kwargs)


def test_a_host_the_sweep_did_not_measure_or_a_folder_that_is_no_sweep_is_refused(
    sweep: Path, tmp_path: Path
) -> None:
    with pytest.raises(
        DeployError, match=r"gpu-z: not measured by sweep sweep-1 \(its hosts: gpu-a, gpu-b\)"
    ):
        choose(sweep, [*HOSTS, HostInput("gpu-z", 8000, "k")])
    with pytest.raises(DeployError, match="is not a sweep"):
        choose(tmp_path / "nothing", HOSTS)
    with pytest.raises(DeployError, match="carries a secret and the host has no api key"):
        choose(sweep, [HostInput("gpu-a", 8000)])


def test_a_plan_written_before_its_later_fields_is_read_and_a_broken_one_is_refused(sweep: Path) -> None:
    path = sweep / "plan.json"
    doc = json.loads(path.read_text())
    for host in doc["hosts"].values():  # schema 2 as first written: no order, closing, server.python
        del host["order"], host["closing"], host["server"]["python"]
    # A host whose settings did not render had only its engine as its server.
    doc["hosts"]["gpu-c"] = {**doc["hosts"]["gpu-a"], "server": {"engine": "sglang"}}
    path.write_text(json.dumps(doc))
    assert choose(sweep, HOSTS)["gpu-a"]["config"] == "s3"
    doc["hosts"]["gpu-a"]["server"] = None  # measured, so an edited plan
    path.write_text(json.dumps(doc))
    with pytest.raises(DeployError, match=r"plan.json: gpu-a has no server$"):
        choose(sweep, HOSTS)
    doc["hosts"]["gpu-a"]["entries"][0]["argv"] = "python -m sglang.launch_server"
    path.write_text(json.dumps(doc))
    said = r"plan.json: not a valid Document: Expected `array`, got `str` - at `\$.hosts\[...\].entries\[0\]"
    with pytest.raises(DeployError, match=said):
        choose(sweep, HOSTS)


def test_levels_with_different_answers_need_a_concurrency(tmp_path: Path) -> None:
    facts = [
        fact(config(None), [run([100], repeat=i, concurrency=c) for c in (1, 8) for i in range(3)], host="h"),
        fact(config(3), [run([v], repeat=i, concurrency=c) for c, v in ((1, 150), (8, 50)) for i in range(3)],
             host="h"),
    ]  # fmt: skip
    root = write_sweep(tmp_path, relaunched(facts))
    plan(root, ["h"], ["baseline", "s3"])
    with pytest.raises(
        DeployError, match="recommends s3 at 1, baseline at 8 on h: choose one with -e concurrency"
    ):
        choose(root, [HostInput("h", 8000, "k")])
    assert choose(root, [HostInput("h", 8000, "k")], concurrency=8)["h"]["config"] == "baseline"


def workload_sweep(root: Path, host: str = "h") -> Path:
    """Chat and code at one level: s2 loses on chat (90 tok/s against 100) and wins on code (150)."""
    speeds = {"baseline": {"chat": 100.0, "code": 100.0}, "s2": {"chat": 90.0, "code": 150.0}}
    facts = [
        fact(config(steps), [run([speeds[name][w] * (1 + 0.001 * i)], repeat=i, workload=w)
                             for w in ("chat", "code") for i in range(3)], host=host)
        for steps, name in [(None, "baseline"), (2, "s2")]
    ]  # fmt: skip
    sweep = write_sweep(root, relaunched(facts))
    plan(sweep, [host], ["baseline", "s2"])
    return sweep


def test_the_config_deployed_for_a_mix_is_recommends_answer_for_it_with_the_mixs_figures(
    tmp_path: Path,
) -> None:
    sweep = workload_sweep(tmp_path)
    host = [HostInput("h", 8000, "k")]
    chatty = choose(sweep, host, mix="chat=0.9,code=0.1")["h"]
    # 1 / (0.9 / 90 + 0.1 / 150) = 93.75 tok/s for s2 against the baseline's 100.
    assert chatty["config"] == "baseline" and chatty["mix"] == pytest.approx({"chat": 0.9, "code": 0.1})
    coder = choose(sweep, host, mix="chat=0.1,code=0.9")["h"]
    assert coder["config"] == "s2" and coder["argv"][-1] == "s2"
    mixed = 1.001 / (0.1 / 90 + 0.9 / 150)  # the middle repeat of each workload
    assert coder["sweep"]["tok_s"] == pytest.approx(mixed, rel=1e-6)
    assert coder["sweep"]["tok_s_ci_lo"] < coder["sweep"]["tok_s"] < coder["sweep"]["tok_s_ci_hi"]
    assert coder["sweep"]["tok_s_ci_hi"] < 150.0  # the mix's own interval, not code's
    # Without a mix, recommend's answer for equal shares: 1 / (0.5 / 90 + 0.5 / 150) = 112.5.
    even = choose(sweep, host)["h"]
    assert even["config"] == "s2" and even["mix"] == pytest.approx({"chat": 0.5, "code": 0.5})


def test_the_gate_sends_the_workloads_the_sweep_measured_and_refuses_when_they_are_gone(
    tmp_path: Path,
) -> None:
    sweep = workload_sweep(tmp_path / "results")
    records = tmp_path / "workloads-0123.jsonl"
    doc = json.loads((sweep / "plan.json").read_text())
    doc["sweep"]["workloads"] = {"records": str(records), "sets": []}
    (sweep / "plan.json").write_text(json.dumps(doc))
    with pytest.raises(DeployError, match=r"^from: the workloads sweep sweep-1 measured \(.*\) are gone"):
        choose(sweep, [HostInput("h", 8000, "k")])
    records.write_text("{}\n")
    sent = choose(sweep, [HostInput("h", 8000, "k")])["h"]["benchmark"]
    assert (sent["records"], sent["seed"]) == (str(records), 7)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("math=1", r"mix: math not measured here \(measured: chat, code\)"),
        ("chat", "mix: 'chat' is not workload=share"),
        ("chat=0", "mix: give at least one workload a share above 0"),
    ],
)
def test_a_bad_mix_or_an_unknown_workload_is_refused(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(DeployError, match=f"^{message}"):
        choose(workload_sweep(tmp_path), [HostInput("h", 8000, "k")], mix=text)


def test_a_mix_on_a_sweep_without_named_workloads_is_refused(sweep: Path) -> None:
    with pytest.raises(DeployError, match=r"^mix: these results name no workloads"):
        choose(sweep, HOSTS, mix="chat=1")
    assert choose(sweep, HOSTS)["gpu-a"]["mix"] is None


def test_the_plan_refuses_a_bad_mix_before_any_host_is_touched(tmp_path: Path) -> None:
    sweep = workload_sweep(tmp_path, host="localhost")
    plan_task = {"name": "plan", "specsweep_deploy_plan": {}, "register": "p",
                 "vars": {"from": str(sweep), "mix": "math=1", "deploy_port": 8000}}  # fmt: skip
    touched = tmp_path / "touched"
    after = {"name": "after", "ansible.builtin.file": {"path": str(touched), "state": "touch"}}
    key = {"ansible.builtin.set_fact": {"llama_server_api_key": "k"}}  # the plan's launch has a secret
    res = run_local_play(tmp_path, [key, plan_task, after])
    said = res.stdout + res.stderr
    assert res.returncode != 0, said
    assert "FAILED: Invalid deploy request: mix: math not measured here (measured: chat, code)" in said, said
    assert not touched.exists()
    plan_task["vars"]["mix"] = "chat=0.1,code=0.9"
    res = run_local_play(tmp_path, [key, plan_task])
    assert res.returncode == 0, res.stdout + res.stderr
    assert "deploy sweep-1 -> localhost (canary): s2 at concurrency 1 (fastest;" in res.stdout, res.stdout


SWEEP = {"tok_s": 100.0, "tok_s_ci_lo": 95.0, "tok_s_ci_hi": 105.0, "accept_length": 2.5,
         "accept_ci_lo": 2.4, "accept_ci_hi": 2.6}  # fmt: skip


def bench(tps: list[float], accept: float | None = 2.5, error: str | None = None) -> dict:
    """A benchmark client document of one run."""
    return {"runs": [to_dict(run(tps, accept_length=accept, error=error))]}


def test_gate_passes_at_the_sweeps_speed_and_names_the_figures() -> None:
    verdict = gate.judge(SWEEP, bench([97.0, 99.0]))
    assert verdict.passed and verdict.gate is None
    assert verdict.tok_s == pytest.approx(98.0) and verdict.tok_s_floor == 95.0 and verdict.errors == 0
    assert verdict.detail == "98.0 tok/s (floor 95.0), accept length 2.50, 2 request(s), no errors"


def test_gate_measures_the_objective_the_sweep_ranked_on() -> None:
    doc = bench([97.0, 99.0])  # one run of two requests, 128 tokens: a 0.5 s TTFT, then 127 at t/s
    user = gate.judge({**SWEEP, "objective": "per_user"}, doc)
    # Per user, a request's tokens over its e2e latency: far below a floor set on throughput.
    assert user.tok_s == pytest.approx(sum(128 / (0.5 + 127 / t) for t in (97.0, 99.0)) / 2)
    assert (user.passed, user.gate) == (False, "tok/s"), user


# A sweep ranked on goodput with a TPOT SLO of 15 ms: 0.8 requests/s within it, 95% CI low 0.7.
GOODPUT_SWEEP = {**SWEEP, "objective": "goodput", "unit": "req/s", "tok_s": 0.8, "tok_s_ci_lo": 0.7,
                 "tok_s_ci_hi": 0.9, "sla_ttft_p99_ms": None, "sla_itl_p99_ms": 15.0}  # fmt: skip


def goodput_bench(tps: list[float]) -> dict:
    """One 4 s run of 128-token requests at these tok/s: TPOT 10 ms at 100 (within 15), 20 at 50."""
    return {"runs": [to_dict(run(tps, accept_length=2.5, duration_s=4.0))]}


def test_a_gate_on_goodput_counts_the_requests_within_the_sweeps_slos() -> None:
    verdict = gate.judge(GOODPUT_SWEEP, goodput_bench([100.0, 100.0, 100.0, 50.0]))
    assert verdict.passed and verdict.tok_s == pytest.approx(0.75) and verdict.unit == "req/s"
    assert verdict.detail == "goodput 0.75 req/s (floor 0.70), accept length 2.50, 4 request(s), no errors"
    # As fast in tokens (128 tok/s over the window, far above any tok/s floor), but one request of
    # four within the TPOT SLO: goodput fails, named so, in requests/s.
    slow = gate.judge(GOODPUT_SWEEP, goodput_bench([100.0, 50.0, 50.0, 50.0]))
    assert (slow.passed, slow.gate, slow.tok_s) == (False, "goodput", pytest.approx(0.25))
    assert slow.detail == "goodput 0.25 req/s, below the sweep's 95% CI low 0.70 (median 0.80)"
    # The SLOs are the sweep's: a TTFT SLO below every request's 0.5 s leaves none good.
    ttft = gate.judge({**GOODPUT_SWEEP, "sla_ttft_p99_ms": 400.0}, goodput_bench([100.0] * 4))
    assert (ttft.gate, ttft.tok_s) == ("goodput", 0.0)
    # With a tolerance the floor is the sweep's median less that many %, as for tok/s.
    assert gate.judge(GOODPUT_SWEEP, goodput_bench([100.0, 100.0, 50.0, 50.0]), tolerance_pct=40.0).passed


def test_a_sweep_ranked_on_goodput_deploys_and_its_gate_measures_goodput(sweep: Path) -> None:
    # Every request within a 1 s TTFT SLO: a run's goodput is its one request over its window.
    plan(sweep, ["gpu-a", "gpu-b"], ["baseline", "s3", "s5"], objective="goodput", sla_ttft_p99_ms=1000.0)
    target = choose(sweep, HOSTS)["gpu-a"]
    assert target["config"] == "s3"
    figures = target["sweep"]
    assert (figures["objective"], figures["unit"], figures["sla_ttft_p99_ms"]) == ("goodput", "req/s", 1000.0)
    assert figures["tok_s"] == pytest.approx(150.0 / 128)  # 1 request in 128 / 150 s
    assert figures["tok_s_ci_lo"] < figures["tok_s"] < figures["tok_s_ci_hi"]
    canary = {"runs": [to_dict(run([150.0, 150.0], accept_length=2.5))]}
    assert gate.judge(figures, canary).passed
    late = {"runs": [to_dict(run([150.0, 150.0], accept_length=2.5, ttft_s=1.5))]}  # beyond the SLO
    verdict = gate.judge(figures, late)
    assert (verdict.passed, verdict.gate, verdict.tok_s) == (False, "goodput", 0.0)


def test_the_deployed_list_gives_each_gates_figures_in_their_unit(
    sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "history.sqlite"
    conn = history.connect(db)
    record(
        conn, row("gpu-b", choose(sweep, HOSTS)["gpu-b"], gate.judge(SWEEP, bench([97.0])).as_dict(), "nohup")
    )
    # A row stored before the unit was: the column comes back empty, and means tok/s.
    conn.execute("ALTER TABLE deployments DROP COLUMN gate_unit")
    conn.commit()
    conn.close()
    plan(sweep, ["gpu-a", "gpu-b"], ["baseline", "s3", "s5"], objective="goodput", sla_ttft_p99_ms=1000.0)
    target = choose(sweep, HOSTS)["gpu-a"]
    verdict = gate.judge(target["sweep"], {"runs": [to_dict(run([150.0, 150.0], accept_length=2.5))]})
    conn = history.connect(db)
    record(conn, row("gpu-a", target, verdict.as_dict(), "nohup"))
    conn.close()
    assert cli.main(["deployed", "--history", str(db)]) == 0
    text = capsys.readouterr().out
    assert "1.17 req/s (sweep 1.17, floor " in text and "97.0 tok/s (sweep 100.0, floor 95.0)" in text, text


@pytest.mark.parametrize(
    ("doc", "tolerance", "name", "detail"),
    [
        (bench([99.0], error="reset"), None, "errors", "1 of 2 request(s) failed (reset)"),
        (bench([90.0]), None, "tok/s", "90.0 tok/s, below the sweep's 95% CI low 95.0 (median 100.0)"),
        (bench([96.0]), -10.0, "tok/s", "96.0 tok/s, below the sweep's floor 110.0 (median 100.0)"),
        (bench([99.0], accept=1.6), None, "accept length",
         "accept length 1.60, outside the sweep's 2.16..2.86 (95% CI 2.40..2.60 +-10%)"),
        ({"runs": [], "error": "server exited"}, None, "errors", "1 of 0 request(s) failed (server exited)"),
    ],
)  # fmt: skip
def test_gate_fails_naming_the_gate_and_the_numbers(doc: dict, tolerance, name: str, detail: str) -> None:
    verdict = gate.judge(SWEEP, doc, tolerance)
    assert not verdict.passed
    assert (verdict.gate, verdict.detail) == (name, detail)


def test_gate_tolerance_and_a_sweep_without_an_interval() -> None:
    assert gate.judge(SWEEP, bench([80.0]), tolerance_pct=25.0).passed  # floor 75
    no_ci = {**SWEEP, "tok_s_ci_lo": None, "accept_ci_lo": None, "accept_ci_hi": None}
    assert gate.floor(no_ci, None) == pytest.approx(100.0 * (1 - gate.DEFAULT_TOLERANCE_PCT / 100))
    assert gate.judge(no_ci, bench([95.0], accept=1.0)).passed  # no accept interval: not judged


def test_a_gate_for_a_mix_weighs_its_workloads_as_the_sweeps_mix_row_does() -> None:
    # Three repeats of each workload, as the gate's benchmark sends the sweep's workloads.
    doc = {"runs": [to_dict(run([tps], repeat=i, workload=w)) for w, tps in (("chat", 90.0), ("code", 150.0))
                    for i in range(3)]}  # fmt: skip
    mixed = 1 / (0.1 / 90 + 0.9 / 150)  # 140.6: what recommend names for chat=0.1,code=0.9
    sweep = {**SWEEP, "tok_s": mixed, "tok_s_ci_lo": mixed - 3, "accept_length": None}
    verdict = gate.judge(sweep, doc, shares={"chat": 0.1, "code": 0.9})
    # Before, the median over the runs of both (120) was held against the mix's 137.6 floor.
    assert verdict.passed and verdict.tok_s == pytest.approx(mixed), verdict.detail
    assert gate.judge(sweep, doc).tok_s == pytest.approx(120.0)  # no mix: the median, as before
    # A workload of the mix the gate did not measure: no figure to pass on.
    assert not gate.judge(sweep, doc, shares={"chat": 0.5, "math": 0.5}).passed


def test_deployments_are_recorded_and_listed_per_host_latest_first(
    sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "history.sqlite"
    targets = choose(sweep, HOSTS)
    verdict = gate.judge(SWEEP, bench([97.0, 99.0])).as_dict()
    conn = history.connect(db)
    record(conn, row("gpu-a", choose(sweep, HOSTS, config="s3")["gpu-b"], verdict, "nohup"))
    record(conn, row("gpu-a", targets["gpu-a"], verdict, "systemd"))
    record(conn, row("gpu-b", targets["gpu-b"], verdict, "nohup"))
    conn.close()
    assert cli.main(["deployed", "--history", str(db), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["host"], r["config"], r["launcher"]) for r in rows] == [
        ("gpu-a", "s3", "systemd"),
        ("gpu-b", "baseline", "nohup"),
    ]
    assert rows[0]["argv_sha256"] == targets["gpu-a"]["argv_sha256"] and rows[0]["gate_tok_s"] == 98.0
    assert cli.main(["deployed", "--history", str(db)]) == 0
    text = capsys.readouterr().out
    assert "gpu-a" in text and "98.0 tok/s (sweep 150.0, floor 95.0), accept 2.50" in text
    assert cli.main(["deployed", "--history", str(tmp_path / "none.sqlite")]) == 2


def test_a_store_from_before_deployments_gains_the_table(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    conn = history.connect(db)
    conn.execute("DROP TABLE deployments")
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    conn = history.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == history.SCHEMA_VERSION
    assert latest(conn).empty
    conn.close()
    assert sqlite3.connect(db).execute("SELECT count(*) FROM deployments").fetchone() == (0,)


def test_deployed_says_when_a_newer_sweep_recommends_a_clearly_faster_config(
    sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "history.sqlite"
    verdict = gate.judge(SWEEP, bench([97.0, 99.0])).as_dict()
    conn = history.connect(db)
    history.ingest(conn, load_sweeps([sweep]))  # the newest sweep: s3 on gpu-a, baseline on gpu-b
    for host in ("gpu-a", "gpu-b"):  # both run the baseline
        record(conn, row(host, choose(sweep, HOSTS, config="baseline")[host], verdict, "nohup"))
    table = moved(conn, latest(conn)).set_index("host")
    conn.close()
    assert table.loc["gpu-a", "newest_config"] == "s3" and bool(table.loc["gpu-a", "redeploy"])
    assert table.loc["gpu-a", "moved_pct"] == pytest.approx(50.0)
    assert table.loc["gpu-b", "newest_config"] == "baseline" and not table.loc["gpu-b", "redeploy"]
    assert cli.main(["deployed", "--history", str(db)]) == 0
    text = capsys.readouterr().out
    assert "s3 (sweep-1, +50.0%): redeploy" in text and "same (sweep-1)" in text


def test_the_nightly_request_measures_the_config_deployed_on_each_host(sweep: Path, tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    assert deployed_configs(db) == {} and not db.exists()  # no store: nothing deployed, none made
    verdict = gate.judge(SWEEP, bench([97.0, 99.0])).as_dict()
    conn = history.connect(db)
    record(conn, row("gpu-a", choose(sweep, HOSTS)["gpu-a"], verdict, "nohup"))  # s3, then
    record(conn, row("gpu-a", choose(sweep, HOSTS, config="baseline")["gpu-a"], verdict, "nohup"))
    record(conn, row("gpu-b", choose(sweep, HOSTS)["gpu-b"], verdict, "nohup"))
    conn.close()
    deployed = deployed_configs(db)
    assert deployed == {"gpu-a": "baseline", "gpu-b": "baseline"}
    night = nightly.sweep_request({"steps": [2]}, deployed={**deployed, "gpu-b": "s3"})
    assert night["host_configs"] == {"gpu-a": ["baseline"], "gpu-b": ["s3"]}
    read = sweep_request.read(night)
    assert read.errors == [] and read["host_configs"] == {"gpu-a": ["baseline"], "gpu-b": ["s3"]}
    assert nightly.sweep_request({})["host_configs"] == {}
    # As playbooks/nightly.yml asks for it: the deployed configs read from the night's store.
    asked = {"overrides": {"steps": [2]}, "mode": None, "plan_only": None, "history": str(db),
             "results_dir": None, "playbook_dir": str(REPO / "playbooks")}  # fmt: skip
    as_played = load_plugin("plugins/filter/specsweep_nightly.py").request(asked)
    assert as_played["host_configs"] == {"gpu-a": ["baseline"], "gpu-b": ["baseline"]}, as_played
    with pytest.raises(ValueError, match="replicate mode and never plan-only"):
        load_plugin("plugins/filter/specsweep_nightly.py").request({**asked, "mode": "shard"})


def test_the_nightly_report_says_when_to_redeploy_and_keeps_its_exit_code(
    sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, out = tmp_path / "history.sqlite", tmp_path / "out"
    conn = history.connect(db)
    history.ingest(conn, load_sweeps([sweep]))  # the night: s3 on gpu-a, baseline on gpu-b
    conn.close()
    regress = ["regress", "--history", str(db), "--json", str(out / "regress.json")]
    before = cli.main(regress)
    assert "Deployed configs" not in capsys.readouterr().out  # nothing deployed: nothing said
    conn = history.connect(db)
    for host in ("gpu-a", "gpu-b"):  # both run the baseline
        target = choose(sweep, HOSTS, config="baseline")[host]
        record(conn, row(host, target, gate.judge(SWEEP, bench([99.0])).as_dict(), "nohup"))
    conn.close()
    assert cli.main(regress) == before
    text = capsys.readouterr().out
    assert "### Deployed configs (1 to redeploy; information, not a failure)" in text, text
    assert "- gpu-a c1: baseline of sweep-1 deployed; tonight s3 (sweep-1, +50.0%): redeploy" in text, text
    assert "- gpu-b c1: baseline of sweep-1 deployed; tonight same (sweep-1)" in text, text
    doc = json.loads((out / "regress.json").read_text())
    assert [(r["host"], r["newest_config"], r["redeploy"]) for r in doc["deployed"]] == [
        ("gpu-a", "s3", True),
        ("gpu-b", "baseline", False),
    ], doc["deployed"]


def test_the_production_unit_runs_the_argv_quoted_and_passes_systemd_analyze(tmp_path: Path) -> None:
    sd = load_plugin("plugins/filter/specsweep_systemd.py")
    jinja = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, keep_trailing_newline=True)
    jinja.filters["systemd_quote"] = sd.systemd_quote
    template = (REPO / "roles/deploy/templates/specsweep-serve.service.j2").read_text()
    target = {
        "sweep_id": "sw1", "config": "s3", "argv_sha256": "ab" * 32, "port": 8000,
        "argv": [sys.executable, "-m", "srv", "--port", "8000", "--chat", "a $HOME 100%"],
        "env": {"NCCL_PROTO": "LL", "NOTE": "two  words"},
    }  # fmt: skip
    text = jinja.from_string(template).render(
        deploy_target=target, deploy_stop_timeout_s=60, ansible_managed="x"
    )
    unit = tmp_path / "specsweep-serve.service"
    unit.write_text(text)
    tool = shutil.which("systemd-analyze")
    assert tool, "systemd-analyze is required (the role validates units with it): apt-get install -y systemd"
    res = subprocess.run([tool, "verify", "--man=no", str(unit)], capture_output=True, text=True, check=False)
    assert res.returncode == 0 and unit.name not in res.stdout + res.stderr, res.stdout + res.stderr
    settings = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert f'ExecStart="{sys.executable}" "-m" "srv" "--port" "8000" "--chat" "a $$HOME 100%%"' in settings
    assert 'Environment="NOTE=two  words"' in settings and "Restart=on-failure" in settings
    assert "WantedBy=multi-user.target" in settings
