"""The systemd launcher for real: a sweep on a systemd-nspawn host, the server run as a unit."""

from __future__ import annotations

import re
from pathlib import Path

from nspawnhost import NspawnHost
from sweeps import SweepRun, playbook


def test_sweep_runs_each_config_as_a_systemd_unit_and_stops_it(
    systemd_inventory: Path, systemd_sweep_host: NspawnHost, tmp_path: Path
) -> None:
    run: SweepRun = playbook(
        systemd_inventory,
        tmp_path,
        "sd",
        "-e",
        "steps=2",
        "-e",
        "repeats=1",
        "-e",
        "max_tokens=8",
        "-e",
        "warmup=0",
    )
    assert run.proc.returncode == 0, run.output[-4000:]
    facts = run.facts()
    assert sorted(facts) == [("systemd2", "baseline"), ("systemd2", "s2")]
    for fact in facts.values():
        assert (fact.status, fact.engine.launcher) == ("ok", "systemd"), fact.failure
        assert fact.runs[0].requests[0].output_tokens == 8
    assert facts[("systemd2", "s2")].runs[0].spec.drafted is not None
    unit = "specsweep-server-8080.service"
    text = systemd_sweep_host.run_in_host(["cat", f"/etc/systemd/system/{unit}"]).stdout
    assert 'ExecStart="/opt/specsweep/llama.cpp-venv/bin/python"' in text, text
    assert '"--spec-ngram-mod-n-max" "2"' in text, text
    state = systemd_sweep_host.run_in_host(["systemctl", "show", "-p", "ActiveState", unit]).stdout
    assert state.strip() == "ActiveState=inactive", state  # stopped after its config

    again = playbook(systemd_inventory, tmp_path, "sd2", "-e", "steps=2", "-e", "plan_only=true")
    assert again.proc.returncode == 0, again.output[-3000:]
    assert re.search(r"^systemd2\s+: ok=\d+\s+changed=0\s", again.output, re.M), again.output[-2000:]


def test_a_unit_that_fails_while_loading_is_noticed_fast(
    systemd_inventory: Path, systemd_sweep_host: NspawnHost, tmp_path: Path
) -> None:
    # A whole model file whose header names an architecture llama.cpp does not know: it passes the
    # preflight's check, the unit starts, then fails while loading it.
    write = (
        "import shutil\n"
        "shutil.copyfile('/opt/specsweep/models/gemma-3-270m-q4_k_m.gguf', '/opt/badarch.gguf')\n"
        "f = open('/opt/badarch.gguf', 'r+b'); head = f.read(1 << 16)\n"
        "f.seek(head.index(b'gemma3', head.index(b'general.architecture'))); f.write(b'gemmaX'); f.close()"
    )
    assert systemd_sweep_host.run_in_host(["python3", "-c", write]).returncode == 0
    run = playbook(
        systemd_inventory, tmp_path, "sdfail", "-e", "steps=1", "-e", "baseline=false",
        "-e", "llama_server_model_path=/opt/badarch.gguf", "-e", "llama_server_assemble_model=false",
    )  # fmt: skip
    assert run.proc.returncode != 0
    facts = run.facts()
    assert ("systemd2", "s1") in facts, run.output[-3000:]
    fact = facts[("systemd2", "s1")]
    assert (fact.failure.phase, fact.failure.cause) == ("load", "model_unsupported"), fact.failure
    assert fact.timings.finished_at - fact.timings.started_at < 20
