"""The nightly's settings agree wherever they are written: the schedule role's defaults and argument
specs, the nightly's own defaults (analysis/nightly/request.py), the example in group_vars/all.yml,
and the sweep's settings the grid is handed to."""

from __future__ import annotations

import re

import pytest
import yaml
from plugin_loader import REPO

from analysis.nightly import request as nightly
from analysis.sweep.request import BY_NAME

ROLE = REPO / "roles" / "nightly_schedule"


def test_argument_specs_describe_every_default_with_its_value() -> None:
    defaults = yaml.safe_load((ROLE / "defaults/main.yml").read_text())
    specs = yaml.safe_load((ROLE / "meta/argument_specs.yml").read_text())["argument_specs"]["main"][
        "options"
    ]
    assert sorted(specs) == sorted(defaults)
    for name, spec in specs.items():
        assert spec.get("type") and spec.get("description"), name
        if "default" in spec:  # templated defaults ({{ ... }}) are described, not repeated
            assert spec["default"] == defaults[name], name
    assert specs["nightly_schedule_state"]["choices"] == ["present", "absent"]


def test_group_vars_example_shows_the_nightly_defaults() -> None:
    text = (REPO / "group_vars" / "all.yml").read_text()
    block = text[text.index("# specsweep_nightly:") :]
    example = yaml.safe_load(
        "\n".join(line.removeprefix("#").removeprefix(" ") for line in block.splitlines())
    )
    assert example == {"specsweep_nightly": nightly.DEFAULTS}
    assert "\nspecsweep_nightly:" not in text  # an example only: the defaults live in Python


def test_every_grid_key_is_a_sweep_setting_and_the_rest_is_the_regression_rule() -> None:
    grid = set(nightly.DEFAULTS) - set(nightly.REGRESS)
    assert grid <= set(BY_NAME)
    # The objective is both: the night's sweep ranks on it and its regressions judge it.
    assert set(nightly.REGRESS) & set(BY_NAME) == {"objective"}


def test_the_night_is_a_replicate_sweep_of_its_grid_named_nightly() -> None:
    request = nightly.sweep_request({"steps": [2], "window": 9})
    assert request["steps"] == [2] and request["repeats"] == 3  # an override, then the defaults
    assert request["mode"] == "replicate" and "window" not in request
    assert request["sweep_id"].startswith("nightly-") and len(request["sweep_id"]) == len(
        "nightly-20261201T020000Z"
    )
    assert nightly.settings({"window": 9})["window"] == 9


@pytest.mark.parametrize(
    ("overrides", "mode", "plan_only", "message"),
    [
        ({"stepz": [1]}, None, None, "specsweep_nightly: unknown key(s) stepz"),
        ({"alpha": 0}, None, None, "specsweep_nightly: alpha must be a p-value above 0 and below 1 (got 0)"),
        ({"window": "5"}, None, None, "specsweep_nightly: window must be a whole number (got '5')"),
        (
            {"rule": "cusum"},
            None,
            None,
            "specsweep_nightly: rule must be one of change_point, window, either",
        ),
        ({"noise": "fleet"}, None, None, "specsweep_nightly: noise must be one of shared, own (got 'fleet')"),
        ({}, "shard", None, "runs in replicate mode and never plan-only (got mode=shard"),
        ({}, None, "true", "plan_only=true"),
    ],
)
def test_a_night_that_would_not_measure_the_whole_grid_is_refused(
    overrides: dict, mode: str | None, plan_only: str | None, message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        nightly.sweep_request(overrides, mode, plan_only)


def test_the_nights_commands_write_next_to_the_results_unless_told_where() -> None:
    sweep = {"dir": "/r/results/nightly-1", "id": "nightly-1", "settings": {"sla_itl_p99_ms": 400}}
    night = {"python": "/py", "sweep": sweep, "overrides": {"window": 7}, "history": None}
    got = nightly.commands({**night, "reports_dir": None, "prometheus": ""})
    out = "/r/results/nightly/reports/nightly-1"
    assert (got["history"], got["out"]) == ("/r/results/history.sqlite", out), got
    assert got["ingest"] == ["/py", "-m", "analysis", "ingest", sweep["dir"], "--history", got["history"],
                             "--sla-itl-p99-ms", "400"], got["ingest"]  # fmt: skip
    report = got["report"]
    assert report[3:] == ["report", sweep["dir"], "--out", out, "--sla-itl-p99-ms", "400"], report
    regress = got["regress"]
    assert regress[regress.index("--window") + 1] == "7", regress
    assert regress[-6:] == ["--markdown", f"{out}/regress.md", "--junit", f"{out}/regress.xml", "--json",
                            f"{out}/regress.json"], regress  # fmt: skip
    told = nightly.commands({**night, "history": "/h.db", "reports_dir": "/rep", "prometheus": "/p.prom"})
    assert (told["history"], told["out"]) == ("/h.db", "/rep/nightly-1"), told
    assert told["regress"][-2:] == ["--prometheus", "/p.prom"], told["regress"]
