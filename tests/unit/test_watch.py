"""Following a host in slices (analysis.watch): the retries that cover a timeout, the record watched."""

from __future__ import annotations

import pytest
from plugin_loader import load_plugin

from analysis import watch


@pytest.mark.parametrize(
    ("timeout_s", "slice_s", "retries"),
    [
        (120, 30, 5),
        (100, 30, 5),
        (7200, 30, 241),
        ("1800", "30", 61),
        (30, 30, 2),
        (10, 30, 2),
        (1.5, 0.5, 4),
    ],
)
def test_the_retries_cover_the_timeout_in_slices_and_one_more(
    timeout_s: object, slice_s: object, retries: int
) -> None:
    assert watch.slice_retries({"timeout_s": timeout_s, "slice_s": slice_s}) == retries


@pytest.mark.parametrize("slice_s", [0, "0", -30])
def test_a_slice_of_no_time_is_refused_naming_it(slice_s: object) -> None:
    with pytest.raises(ValueError, match="slice_s must be over 0"):
        watch.slice_retries({"timeout_s": 120, "slice_s": slice_s})


@pytest.mark.parametrize(
    ("server", "pidfile", "unit"),
    [
        ({"launcher": "nohup", "pidfile": "/var/tmp/s.pid", "log": "/var/tmp/s.log"}, "/var/tmp/s.pid", None),
        ({"launcher": "systemd", "pidfile": "/var/tmp/s.pid", "unit": "s.service"}, None, "s.service"),
        ({"launcher": "nohup", "pidfile": "/var/tmp/s.pid", "unit": "s.service"}, "/var/tmp/s.pid", None),
        ({}, None, None),
    ],
)
def test_a_server_is_watched_by_its_pid_record_under_nohup_and_its_unit_under_systemd(
    server: dict, pidfile: str | None, unit: str | None
) -> None:
    assert (watch.server_pidfile(server), watch.server_unit(server)) == (pidfile, unit)


def test_the_filters_hand_the_roles_these_functions() -> None:
    filters = load_plugin("plugins/filter/specsweep_watch.py").FilterModule().filters()
    assert filters == {
        "specsweep_slice_retries": watch.slice_retries,
        "specsweep_server_pidfile": watch.server_pidfile,
        "specsweep_server_unit": watch.server_unit,
    }
