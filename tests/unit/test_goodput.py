"""SLA, goodput and throughput per (config, concurrency), and `report --sla-*`."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType, SimpleNamespace

import msgspec
import pandas as pd
import pytest
from factories import config, fact, run, write_sweep
from sglang_wheel import sglang_source

from analysis import cli
from analysis.facts.load import load_sweeps
from analysis.facts.schema import RequestResult, Run
from analysis.report.cli import build_tables
from analysis.report.html import render_html
from analysis.report.render import render
from analysis.report.sla import Sla, good_requests, run_table

# (ttft s, e2e s, output tokens, error): against TTFT <= 500 ms and TPOT <= 30 ms the first, the
# single-token answer and the one exactly at the TTFT SLO are good. TPOT = (e2e - ttft) / (tokens - 1).
REQUESTS = [
    (0.2, 2.2, 101, None),  # TTFT 200 ms, TPOT 20 ms: good
    (0.6, 2.6, 101, None),  # TTFT 600 ms: misses the TTFT SLO
    (0.2, 4.2, 101, None),  # TPOT 40 ms: misses the TPOT SLO
    (0.1, 0.1, 1, None),  # one token: TPOT counts as 0, good
    (0.0, 0.3, 0, "HTTPError: 500"),  # failed: never good
    (0.5, 2.5, 101, None),  # TTFT exactly 500 ms: meets it (SGLang compares with <=)
]
SLA = Sla(ttft_p99_ms=500, itl_p99_ms=30)


def measured_run(repeat: int = 0, concurrency: int = 1, duration_s: float = 10.0) -> Run:
    """One run of REQUESTS."""
    requests = [
        RequestResult(
            prompt_id=f"p{i}",
            output_tokens=tokens,
            ttft_s=ttft,
            e2e_s=e2e,
            decode_tps=None if error or tokens < 2 else (tokens - 1) / (e2e - ttft),
            itl_s=[] if error else [(e2e - ttft) / max(tokens - 1, 1)] * max(tokens - 1, 0),
            text="" if error else f"answer {i}",
            error=error,
        )
        for i, (ttft, e2e, tokens, error) in enumerate(REQUESTS)
    ]
    return Run(repeat=repeat, concurrency=concurrency, duration_s=duration_s, requests=requests)


def test_a_request_is_good_when_it_succeeded_within_the_ttft_and_tpot_slos(tmp_path: Path) -> None:
    result = load_sweeps([write_sweep(tmp_path, [fact(config(2), [measured_run()])])])
    assert good_requests(result.requests, SLA).tolist() == [True, False, False, True, False, True]
    assert good_requests(result.requests, Sla(ttft_p99_ms=500)).tolist() == [
        True,
        False,
        True,
        True,
        False,
        True,
    ]
    assert good_requests(result.requests, Sla()).tolist() == [True, True, True, True, False, True]
    runs = run_table(result.runs, result.requests, SLA)
    assert runs["goodput_rps"].tolist() == [pytest.approx(0.3)]  # 3 good / 10 s
    assert runs["slo_attainment"].tolist() == [pytest.approx(0.5)]  # 3 of the 6 sent
    assert runs["total_tps"].tolist() == [pytest.approx(40.5)]  # (101 * 4 + 1) tokens / 10 s


def test_a_steady_load_window_counts_its_straddling_requests_toward_goodput(tmp_path: Path) -> None:
    # The 6 requests wholly inside a 10 s window, while the client served 9 inside it (ramp and
    # drain by their share of time): half of them good is 4.5 good requests, not 3.
    steady = msgspec.structs.replace(measured_run(concurrency=4), window_requests=9.0)
    result = load_sweeps([write_sweep(tmp_path, [fact(config(2), [steady])])])
    runs = run_table(result.runs, result.requests, SLA)
    assert runs["goodput_rps"].tolist() == [pytest.approx(0.45)]
    assert runs["slo_attainment"].tolist() == [pytest.approx(0.5)]


def sglang_goodput() -> ModuleType:
    """sglang.benchmark.goodput from the 0.5.23 wheel (it imports only msgspec at run time)."""
    path = sglang_source("sglang/benchmark/") / "benchmark" / "goodput.py"
    spec = importlib.util.spec_from_file_location("sglang_goodput_0_5_23", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_goodput_equals_sglangs_own_calculate_goodput(tmp_path: Path) -> None:
    outputs = [
        SimpleNamespace(success=error is None, output_len=tokens, latency=e2e, ttft=ttft)
        for ttft, e2e, tokens, error in REQUESTS
    ]
    result = load_sweeps([write_sweep(tmp_path, [fact(config(2), [measured_run()])])])
    for sla, slos in [(SLA, {"ttft": 500.0, "tpot": 30.0}), (Sla(itl_p99_ms=19.0), {"tpot": 19.0})]:
        theirs = sglang_goodput().calculate_goodput(outputs, slos, 10.0)
        ours = run_table(result.runs, result.requests, sla).iloc[0]
        assert ours["goodput_rps"] == pytest.approx(theirs.request_goodput), slos
        assert ours["slo_attainment"] == pytest.approx(theirs.slo_attainment), slos


def sla_step(tmp_path: Path, sla: Sla = SLA) -> pd.DataFrame:
    """The step table of a baseline and s2, two repeats each at concurrency 1 and 4."""
    facts = [
        fact(config(), [run([100.0], repeat=r, concurrency=c, ttft_s=0.2, duration_s=10.0)
                         for c in (1, 4) for r in (0, 1)]),
        fact(config(2), [measured_run(r, c, 5.0 * (r + 1)) for c in (1, 4) for r in (0, 1)]),
    ]  # fmt: skip
    return build_tables(load_sweeps([write_sweep(tmp_path, facts)]), sla=sla).step.set_index(
        ["config", "concurrency"]
    )


def test_cells_hold_the_median_over_repeats_per_user_throughput_and_the_sla_verdict(tmp_path: Path) -> None:
    step = sla_step(tmp_path)
    s2 = step.loc[("s2", 4)]
    # Repeats of 5 s and 10 s: goodput 0.6 and 0.3, total 81 and 40.5 tok/s; medians between.
    assert s2["goodput_rps"] == pytest.approx(0.45)
    assert s2["total_tps"] == pytest.approx(60.75)
    # Per user (a request's tokens / its e2e), as the p99s: only from repeats that completed.
    assert pd.isna(s2["user_tps"])
    assert s2["slo_attainment"] == pytest.approx(0.5)
    # Every repeat has a failed request: s2 failed, has no p99 to show, and cannot meet the SLA.
    assert pd.isna(s2["ttft_p99_ms"]) and not s2["meets_sla"]
    base = step.loc[("baseline", 1)]
    assert (base["ttft_p99_ms"], base["tpot_p99_ms"]) == (pytest.approx(200.0), pytest.approx(10.0))
    assert base["meets_sla"] and base["goodput_rps"] == pytest.approx(0.1)  # 1 request / 10 s
    tight = sla_step(tmp_path / "tight", Sla(itl_p99_ms=9.9)).loc[("baseline", 1)]
    assert not tight["meets_sla"] and tight["goodput_rps"] == 0.0


def test_without_an_sla_there_is_no_goodput_and_no_verdict(tmp_path: Path) -> None:
    step = sla_step(tmp_path, Sla())
    assert step["goodput_rps"].isna().all()
    assert step["meets_sla"].isna().all()
    assert step.loc[("baseline", 1), "total_tps"] == pytest.approx(12.8)  # 128 tokens / 10 s


def test_report_shows_goodput_and_the_sla_verdict_only_when_an_sla_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    facts = [
        fact(config(), [run([100.0], repeat=r, concurrency=c, ttft_s=0.2, duration_s=10.0) for c in (1, 4)
                         for r in (0, 1)]),
        fact(config(2), [run([120.0], repeat=r, concurrency=c, ttft_s=0.8, duration_s=10.0) for c in (1, 4)
                         for r in (0, 1)]),
    ]  # fmt: skip
    sweep = write_sweep(tmp_path, facts)
    assert cli.main(["report", str(sweep), "--sla-ttft-p99-ms", "500", "--sla-itl-p99-ms", "30"]) == 0
    text = capsys.readouterr().out
    section = text[text.index("SLA and goodput | sweep sweep-1 | host gpu-a | sglang Kimi-K2.5") :]
    lines = section.splitlines()
    assert lines[1].startswith("SLA: TTFT p99 <= 500 ms, TPOT p99 <= 30 ms; goodput:")
    assert lines[2].split() == [
        "concurrency", "config", "tok/s", "TTFT", "p50/p99", "ms", "TPOT", "p50/p99", "ms", "goodput",
        "req/s", "SLO", "met", "total", "tok/s", "per-user", "tok/s", "meets", "SLA",
    ]  # fmt: skip
    assert lines[3].split() == [
        "1",
        "baseline",
        "100.0",
        "200/200",
        "10.0/10.0",
        "0.10",
        "100%",
        "12.8",
        "87.1",  # per user: 128 tokens in 0.2 + 1.27 s (127 after the first at 100 tok/s)
        "yes",
    ]
    assert lines[4].split() == ["1", "s2", "120.0", "800/800", "8.3/8.3", "0.00", "0%", "12.8", "68.9", "no"]
    assert lines[6].split()[:2] == ["4", "s2"] and lines[6].split()[-2:] == ["68.9", "no"]
    assert cli.main(["report", str(sweep)]) == 0
    assert "SLA and goodput" not in capsys.readouterr().out
    html = render_html(build_tables(load_sweeps([sweep]), sla=SLA), [])
    assert "<h2>SLA, goodput, adaptive and acceptance</h2>" in html
    assert "SLA and goodput | sweep sweep-1 | host gpu-a | sglang Kimi-K2.5" in html
    csv = pd.read_csv(pd.io.common.StringIO(render(build_tables(load_sweeps([sweep]), sla=SLA), "csv")))
    assert csv.set_index(["config", "concurrency"]).loc[("s2", 4), "goodput_rps"] == 0.0


def test_sla_options_refuse_a_non_positive_target(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["report", str(tmp_path), "--sla-itl-p99-ms", "0"])
    assert exit_.value.code == 2
    assert "0 is not a positive number of milliseconds" in capsys.readouterr().err
