"""systemd quoting (plugins/filter/specsweep_systemd.py), checked against systemd's own parser.

The round trip renders the real unit template (roles/server_process/templates/
specsweep-server.service.j2) with a hostile argv and env, has `systemd-analyze verify` accept it,
then reads back what systemd parsed: `systemd --test --system` (no running PID 1 needed) loads the
unit and dumps its "Command Line:" and "Environment:" exactly as the manager holds them. It refuses
to run as root, so as root it runs as nobody through `setpriv`.

Needs the `systemd` package (systemd-analyze and /lib/systemd/systemd) and `setpriv`
(util-linux); a missing tool fails the test, it is never skipped.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import jinja2
import pytest
from plugin_loader import REPO, load_plugin

sd = load_plugin("plugins/filter/specsweep_systemd.py")

TEMPLATE = REPO / "roles/server_process/templates/specsweep-server.service.j2"
SYSTEMD_BINARIES = ("/usr/lib/systemd/systemd", "/lib/systemd/systemd")
NOBODY = "65534"
UNIT = "specsweep-server-8199.service"


# --------------------------------------------------------------------------------------
# The quoting itself
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "quoted"),
    [
        pytest.param("plain", '"plain"', id="plain"),
        pytest.param(8080, '"8080"', id="number"),
        pytest.param("", '""', id="empty"),
        pytest.param("a b  c", '"a b  c"', id="spaces"),
        pytest.param("$HOME ${X} $$", '"$$HOME $${X} $$$$"', id="dollar"),
        pytest.param("100% %n", '"100%% %%n"', id="percent"),
        pytest.param('say "hi"', '"say \\"hi\\""', id="double-quote"),
        pytest.param("C:\\dir\\n", '"C:\\\\dir\\\\n"', id="backslash"),
        pytest.param("it's", '"it\'s"', id="single-quote"),
        pytest.param("; $(id) `id`", '"; $$(id) `id`"', id="shell-syntax"),
    ],
)
def test_execstart_words_are_double_quoted_and_escaped(word: object, quoted: str) -> None:
    assert sd.systemd_quote(word) == quoted


def test_environment_mode_keeps_dollars_single() -> None:
    # Environment= does not expand $VAR, so doubling would put "$$" into the server's env.
    assert sd.systemd_quote('KEY=$HOME 50% "x" \\y', environment=True) == '"KEY=$HOME 50%% \\"x\\" \\\\y"'


@pytest.mark.parametrize("bad", ["two\nlines", "carriage\rreturn", "nul\0byte"])
def test_line_breaks_and_nul_are_refused(bad: str) -> None:
    for environment in (False, True):
        with pytest.raises(ValueError, match=r"^systemd_quote: newline or NUL in "):
            sd.systemd_quote(bad, environment=environment)


# --------------------------------------------------------------------------------------
# Round trip through systemd's parser
# --------------------------------------------------------------------------------------


def tool(path_or_name: str, why: str) -> str:
    """Absolute path of a required tool, or a test failure that says how to get it."""
    found = shutil.which(path_or_name) if "/" not in path_or_name else path_or_name
    if not found or not os.access(found, os.X_OK):
        pytest.fail(
            f"{path_or_name} is required ({why}): apt-get install -y systemd util-linux", pytrace=False
        )
    return found


def systemd_binary() -> str:
    """The service manager binary, wherever this distribution keeps it."""
    for path in SYSTEMD_BINARIES:
        if os.access(path, os.X_OK):
            return path
    pytest.fail(f"none of {SYSTEMD_BINARIES} exists: apt-get install -y systemd", pytrace=False)


@pytest.fixture
def unit_dir() -> Iterator[Path]:
    """A world-readable folder: `systemd --test` runs as nobody when the tests run as root."""
    path = Path(tempfile.mkdtemp(prefix="specsweep-unit-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def render_unit(unit_dir: Path, argv: list[str], env: dict[str, str]) -> Path:
    """The server_process role's unit for this argv/env, rendered as the template module would."""
    jinja = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True)  # as Ansible renders
    jinja.filters["systemd_quote"] = sd.systemd_quote
    text = jinja.from_string(TEMPLATE.read_text(encoding="utf-8")).render(
        ansible_managed="Ansible managed",
        server_process_port=8199,
        server_process_env=env,
        server_process_argv=argv,
        server_process_log=str(unit_dir / "server 8199.log"),
        server_process_stop_timeout_s=60,
    )
    unit = unit_dir / UNIT
    unit.write_text(text, encoding="utf-8")
    unit.chmod(0o644)
    return unit


_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def parse_command_line(text: str) -> list[str]:
    """Words of systemd's dumped "Command Line:" (quote_command_line: shell-style, C escapes)."""

    def unescape(match: re.Match[str]) -> str:
        code = match[1]
        return chr(int(code, 8)) if code.isdigit() else _ESCAPES.get(code, code)

    words = []
    for match in re.finditer(r'"((?:[^"\\]|\\.)*)"|(\S+)', text):
        quoted, bare = match.groups()
        words.append(bare if quoted is None else re.sub(r"\\([0-7]{3}|.)", unescape, quoted))
    return words


def systemd_parsed(unit_dir: Path) -> tuple[list[list[str]], list[str]]:
    """(ExecStart command lines, Environment entries) of UNIT as systemd itself loads them."""
    command = [systemd_binary(), "--test", "--system", f"--unit={UNIT}", "--log-target=console"]
    if os.geteuid() == 0:  # "Don't run test mode as root."
        setpriv = tool("setpriv", "systemd --test refuses to run as root")
        command = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *command]
    # The trailing ':' keeps the distribution's own units (sysinit.target, ...) on the search path.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/", "SYSTEMD_UNIT_PATH": f"{unit_dir}:"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    dump = done.stdout
    start = dump.find(f"-> Unit {UNIT}:")
    assert done.returncode == 0 and start >= 0, f"systemd --test: rc={done.returncode}\n{done.stderr}"
    end = dump.find("\t-> Unit ", start + 1)
    block = dump[start : end if end > 0 else len(dump)].splitlines()
    assert f"\t\tFragment Path: {unit_dir / UNIT}" in block, "systemd loaded another file than ours"
    commands = [
        parse_command_line(line.split("Command Line: ", 1)[1]) for line in block if "Command Line: " in line
    ]
    environment = [
        line.split("Environment: ", 1)[1] for line in block if line.startswith("\t\tEnvironment: ")
    ]
    return commands, environment


HOSTILE_ARGS = [
    "",
    "two  spaces",
    "$HOME",
    "${HOME}x",
    "$$",
    "100%",
    "%n %i %%",
    'say "hi"',
    "C:\\dir\\new",
    "\\;",
    ";",
    "$(touch /tmp/specsweep-pwned)",
    "`id`",
    "'single'",
    "tab\there",
    "ünïcödé ✓",
    "-dash",
    "@at",
    "--api-key=s3 cr3t",
]
HOSTILE_ENV = {
    "NCCL_DEBUG": "INFO",
    "SPACED": "a b  c",
    "DOLLAR": "$HOME ${PATH} $$",
    "PERCENT": "50% %n",
    "QUOTES": "say \"hi\" 'there'",
    "BACKSLASH": "C:\\dir\\new",
}


def test_rendered_unit_round_trips_through_systemd(unit_dir: Path) -> None:
    # The executable's own path has a space and a '%': systemd must find the very file. (No '$': systemd
    # never variable-expands the executable path, so the '$$' that systemd_quote writes would stay '$$'.)
    server = unit_dir / "my server 100%.sh"
    server.write_text("#!/bin/sh\nexit 0\n")
    server.chmod(0o755)
    argv = [str(server), *HOSTILE_ARGS]
    unit = render_unit(unit_dir, argv, HOSTILE_ENV)

    analyze = tool("systemd-analyze", "the unit must pass `systemd-analyze verify`, as the role validates it")
    verify = subprocess.run(
        [analyze, "verify", "--man=no", str(unit)], capture_output=True, text=True, timeout=60, check=False
    )
    unit_text = unit.read_text()
    assert verify.returncode == 0, (
        f"verify rc={verify.returncode}\n{verify.stderr}{verify.stdout}\n{unit_text}"
    )
    # Warnings ("Ignoring ...", "Invalid escape ...") exit 0 too: any mention of our unit is a problem.
    assert UNIT not in verify.stderr + verify.stdout, verify.stderr + verify.stdout

    commands, environment = systemd_parsed(unit_dir)
    # Quotes, C escapes and %-specifiers are resolved at load; "$$" stays until exec, where it becomes
    # one literal "$" (systemd.service(5), "Command lines"), so each $ must be stored doubled here.
    assert commands == [[argv[0], *(a.replace("$", "$$") for a in argv[1:])]], unit_text
    assert environment == [f"{k}={v}" for k, v in sorted(HOSTILE_ENV.items())], unit_text


def test_an_unquoted_dollar_would_have_been_expanded(unit_dir: Path) -> None:
    """The check above can fail: a word quoted without doubling '$' is stored as a variable."""
    render_unit(unit_dir, ["/bin/true"], {})
    unit = unit_dir / UNIT
    unit.write_text(unit.read_text().replace('ExecStart="/bin/true"', 'ExecStart="/bin/true" "$HOME" "%%"'))
    commands, _ = systemd_parsed(unit_dir)
    assert commands == [["/bin/true", "$HOME", "%"]]
    assert commands[0][1] != "$$HOME"
