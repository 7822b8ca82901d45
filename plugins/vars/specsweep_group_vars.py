"""The suite's own group_vars/ for every inventory, below the inventory's own group_vars."""

from __future__ import annotations

import os

from ansible.inventory.group import InventoryObjectType
from ansible.plugins.vars import BaseVarsPlugin
from ansible.utils.vars import combine_vars

DOCUMENTATION = r"""
name: specsweep_group_vars
short_description: the repository's group_vars/ for any inventory (-i anywhere)
description:
  - Ansible reads group_vars/ next to an inventory or next to a playbook. The sweep's playbooks live
    in playbooks/ and an operator's inventory may live anywhere (-i /srv/fleet/hosts.yml), so neither
    is the repository's group_vars/ (engine settings, env profiles, the seed case's gpu.yml).
  - This plugin loads them for the inventory's groups, at inventory precedence. It is enabled before
    host_group_vars, so the inventory's own group_vars/ (and host_vars, play vars and -e) override them.
  - It contributes nothing for paths next to the suite's playbooks and roles, which would rank it
    above the inventory (playbook group_vars).
"""

REPO = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
GROUP_VARS = os.path.join(REPO, "group_vars")
# Search paths of plays and roles: what Ansible passes at playbook precedence.
PLAY_PATHS = tuple(os.path.join(REPO, d) for d in ("playbooks", "roles"))


class VarsModule(BaseVarsPlugin):
    """group_vars/<group>.yml (or a folder of that name) of the repository, for each group."""

    REQUIRES_ENABLED = True
    is_stateless = True

    def get_vars(self, loader, path, entities, cache=True):
        real = os.path.realpath(path)
        if real == REPO or real.startswith(PLAY_PATHS) or not os.path.isdir(GROUP_VARS):
            return {}
        data: dict = {}
        for entity in entities if isinstance(entities, list) else [entities]:
            if entity.base_type is not InventoryObjectType.GROUP:
                continue
            for found in loader.find_vars_files(GROUP_VARS, entity.name):
                data = combine_vars(
                    data, loader.load_from_file(found, cache="all", trusted_as_template=True) or {}
                )
        return data
