"""The `python -m analysis` dispatcher: every subcommand reachable, each run loading only its own."""

from __future__ import annotations

import subprocess
import sys

import pytest

from analysis.cli import SUBCOMMANDS, build_parser, main


def test_every_subcommand_is_registered_under_its_own_name() -> None:
    choices = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(choices) == set(SUBCOMMANDS)
    for name in SUBCOMMANDS:
        assert set(build_parser(name)._subparsers._group_actions[0].choices) == {name}  # type: ignore[union-attr]


def test_an_unknown_subcommand_is_refused_listing_them_all(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["reprot", "x"])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'reprot'" in err
    assert all(name in err for name in SUBCOMMANDS)


def test_a_report_does_not_load_the_search_or_the_nightly() -> None:
    probe = (
        "import sys; from analysis.cli import build_parser; build_parser('report');"
        "print(sorted(m for m in sys.modules if m.startswith(('analysis.search', 'analysis.nightly'))))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
