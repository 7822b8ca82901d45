"""The nightly's settings agree wherever they are written: the role's defaults and argument specs,
the nightly playbook's defaults, the example in group_vars/all.yml and the sweep's knobs."""

from __future__ import annotations

import re

import yaml
from plugin_loader import REPO

ROLE = REPO / "roles" / "nightly_schedule"
NIGHTLY = yaml.safe_load((REPO / "playbooks" / "nightly.yml").read_text())
NIGHTLY_DEFAULTS = NIGHTLY[0]["vars"]["specsweep_nightly_defaults"]
REGRESS_KEYS = {"window", "threshold", "mad_k"}


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
    assert example == {"specsweep_nightly": NIGHTLY_DEFAULTS}
    assert "\nspecsweep_nightly:" not in text  # an example only: the playbook holds the defaults


def test_every_grid_key_is_handed_to_the_sweep_knob_of_the_same_name() -> None:
    imported = NIGHTLY[1]
    assert imported["ansible.builtin.import_playbook"] == "sweep.yml"
    knobs = imported["vars"]
    plan = (REPO / "roles" / "sweep_plan" / "tasks" / "main.yml").read_text()
    for key in set(NIGHTLY_DEFAULTS) - REGRESS_KEYS:
        assert knobs[key] == f"{{{{ hostvars['localhost'].specsweep_nightly_settings.{key} }}}}", key
        # The sweep request reads the knob of that name: `steps: "{{ ... steps ... }}"`.
        assert re.search(rf"^ +{key}: \"{{{{.*\b{key}\b.*}}}}\"$", plan, re.M), key
    assert knobs["mode"] == "replicate"
