"""The nightly play's analysis commands as ansible-playbook renders them, and run as rendered.

The play's own `vars:` and the commands' `argv:` templates are taken from playbooks/nightly.yml and
rendered by the real ansible-playbook (the repo's ansible.cfg and filters) with a plan as the sweep
play leaves it; the rendered ingest and regress then run on nights built from real CPU facts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from test_regress_recommendations import SLA, faster_prefill, night

from analysis.cli import main
from analysis.deployments import FIELDS, record
from analysis.nightly import history
from analysis.nightly.settings import Settings

REPO = Path(__file__).resolve().parents[2]
INGEST = "Nightly | Add the night's runs and recommendation to the history"
REGRESS = "Nightly | Compare the night with the previous ones"
REPORT = "Nightly | Write the report, tables and plots"


def commands() -> tuple[dict[str, Any], dict[str, Any]]:
    """The nightly play's vars, and its commands' argv templates by task name."""
    plays = yaml.safe_load((REPO / "playbooks" / "nightly.yml").read_text())
    play = next(p for p in plays if p.get("hosts"))
    tasks = play["tasks"][0]["block"]
    argv = {t["name"]: t["ansible.builtin.command"]["argv"] for t in tasks if "ansible.builtin.command" in t}
    return play["vars"], argv


def render(tmp_path: Path, sweep: Path, settings: dict[str, Any], *extra_vars: str) -> dict[str, list[str]]:
    """Each command's argv, by task name, as ansible-playbook renders it for this sweep folder."""
    play_vars, templates = commands()
    plan = {"sweep": {"dir": str(sweep), "id": sweep.name, "repo": str(REPO), "settings": settings}}
    out = tmp_path / "rendered"
    out.mkdir()
    tasks = [
        {"name": f"Render {i}", "vars": {"argv": template},
         "ansible.builtin.copy": {"content": "{{ argv | to_json }}", "dest": str(out / f"{i}.json")}}
        for i, template in enumerate(templates.values())
    ]  # fmt: skip
    play = tmp_path / "render.yml"
    play_vars = {**play_vars, "specsweep_plan": plan}
    play.write_text(
        json.dumps([{"hosts": "localhost", "gather_facts": False, "vars": play_vars, "tasks": tasks}])
    )
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), str(play), *extra_vars],
        capture_output=True, text=True, cwd=REPO, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {name: json.loads((out / f"{i}.json").read_text()) for i, name in enumerate(templates)}


def test_the_nightly_passes_its_slos_and_outputs_and_its_commands_run_as_rendered(tmp_path: Path) -> None:
    results = tmp_path / "results"
    first = night(results, 1, [1, 4])
    latest = night(results, 2, [1, 4], {(4, "baseline"): faster_prefill})
    prom = tmp_path / "textfile" / "specsweep.prom"
    settings = {"sla_ttft_p99_ms": 2200.0, "sla_itl_p99_ms": None}
    argv = render(tmp_path, latest, settings, "-e", f"nightly_prometheus_textfile={prom}")
    history, out = results / "history.sqlite", results / "nightly" / "reports" / "n2"
    python = [argv[INGEST][0], "-m", "analysis"]
    sla = ["--sla-ttft-p99-ms", "2200.0"]
    assert argv[INGEST] == [*python, "ingest", str(latest), "--history", str(history), *sla], argv[INGEST]
    assert argv[REPORT] == [*python, "report", str(latest), "--out", str(out), *sla], argv[REPORT]
    assert argv[REGRESS][-6:] == ["--junit", f"{out}/regress.xml", "--json", f"{out}/regress.json",
                                  "--prometheus", str(prom)], argv[REGRESS]  # fmt: skip

    # As the play runs them, the previous night already in the history.
    assert main(["ingest", str(first), "--history", str(history), *SLA]) == 0
    for name in (REPORT, INGEST, REGRESS):
        proc = subprocess.run(argv[name], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, (name, proc.stdout[-3000:], proc.stderr[-3000:])
    report = json.loads((out / "regress.json").read_text())
    assert [(c["concurrency"], c["previous"], c["latest"]) for c in report["recommendations"]] == [
        (4, "s2", "baseline")
    ], report["recommendations"]
    assert "specsweep_regress_verdict{" in prom.read_text()


def test_only_the_slos_set_are_passed_and_no_textfile_unless_asked(tmp_path: Path) -> None:
    latest = night(tmp_path / "results", 1, [1])
    argv = render(tmp_path, latest, {"sla_ttft_p99_ms": None, "sla_itl_p99_ms": 400})
    assert argv[INGEST][-2:] == ["--sla-itl-p99-ms", "400"], argv[INGEST]
    assert "--sla-ttft-p99-ms" not in argv[INGEST] + argv[REPORT], argv
    assert "--prometheus" not in argv[REGRESS] and "--json" in argv[REGRESS], argv[REGRESS]


def test_the_nightly_hands_every_regression_setting_to_regress(tmp_path: Path) -> None:
    results = tmp_path / "results"
    first, latest = night(results, 1, [1]), night(results, 2, [1])
    chosen = {"alpha": 0.01, "rule": "either", "min_accept_length": 1.1, "window": 7}
    argv = render(tmp_path, latest, {}, "-e", json.dumps({"specsweep_nightly": chosen}))[REGRESS]
    for name, value in {**Settings().as_dict(), **chosen}.items():
        option = f"--{name.replace('_', '-')}"
        assert argv[argv.index(option) + 1] == str(value), (option, argv)

    assert main(["ingest", str(first), str(latest), "--history", str(results / "history.sqlite")]) == 0
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = results / "nightly" / "reports" / latest.name / "regress.json"
    settings = json.loads(out.read_text())["settings"]
    assert {name: settings[name] for name in chosen} == chosen


def test_the_nights_request_measures_what_the_history_says_is_deployed(tmp_path: Path) -> None:
    sweep_vars = yaml.safe_load((REPO / "playbooks" / "nightly.yml").read_text())[0]["vars"]
    db = tmp_path / "history.sqlite"
    conn = history.connect(db)
    record(conn, {**dict.fromkeys(FIELDS), "host": "gpu-a", "deployed_at": 1.0, "sweep_id": "n1",
                  "config": "s3", "argv_sha256": "ab"})  # fmt: skip
    conn.close()
    out = tmp_path / "request.json"
    play = tmp_path / "render.yml"
    task = {"ansible.builtin.copy": {"content": "{{ specsweep_request | to_json }}", "dest": str(out)}}
    play.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "vars": sweep_vars,
                                 "tasks": [task]}]))  # fmt: skip
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), str(play), "-e", f"nightly_history={db}"],
        capture_output=True, text=True, cwd=REPO, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    request = json.loads(out.read_text())
    assert request["host_configs"] == {"gpu-a": ["s3"]} and request["mode"] == "replicate", request
