"""The order a host launches its configs in: launches, a seeded shuffle, the baseline again.

Why shuffle: a fixed order puts the baseline first on a cold host and each config after the same
neighbour, so warm-up, thermal and background drift land on the same configs every sweep
(Mytkowicz et al., ASPLOS 2009). Each launch round is its own permutation of the grid (a randomised
complete block design): a config's N launches are spread over the sweep, so the launch-to-launch
spread the analysis sees includes the drift of the sweep, and no config always follows another.
The baseline, in the shuffle like any config, is also launched again after every `baseline_every`
other launches and once at the end: those launches measure the drift itself.

The seed is drawn at plan time unless given (`-e order_seed=N` replays an order) and recorded in
sweep.json; each host's shuffle is seeded with (seed, host) so hosts do not run in lockstep, and a
multi-node follower uses its leader's name to run the very same order.

A launch k >= 2 of a config is its own fact, `<host>/<config_id>.launch<k>.json` (`fact_name`).
"""

from __future__ import annotations

import random
import re
import secrets
from collections.abc import Sequence
from typing import Any

_LAUNCH = re.compile(r"^(?P<id>.+)\.launch(?P<k>[2-9]|[1-9][0-9]+)\Z")

# Why a slot is in the order (the playbook's progress line and the plan say it).
GRID, CHECK, FINALIST = "grid", "baseline again", "finalist"


def fact_name(config_id: str, launch: int) -> str:
    """The fact file's stem: the config id for launch 1 (as before launches existed), else `.launch<k>`."""
    return config_id if launch == 1 else f"{config_id}.launch{launch}"


def parse_name(stem: str) -> tuple[str, int]:
    """(config id, launch) from a fact file's stem; config ids never contain `.launch<k>` at the end."""
    found = _LAUNCH.match(stem)
    return (found["id"], int(found["k"])) if found else (stem, 1)


def draw_seed() -> int:
    """A fresh seed, small enough to type back with -e order_seed=N."""
    return secrets.randbelow(2**31)


def slot(config_id: str, launch: int, why: str, speculative: bool) -> dict[str, Any]:
    """One launch in a host's order, as the playbook loops over it."""
    return {"id": config_id, "launch": launch, "name": fact_name(config_id, launch), "why": why,
            "speculative": speculative}  # fmt: skip


def schedule(
    configs: Sequence[tuple[str, bool]],
    launches: int,
    seed: int | None,
    host_key: str,
    baseline_every: int,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(order, closing) of one host: `configs` are (id, speculative) in grid order.

    order: `launches` rounds, each a permutation of the configs (the grid's order when seed is
    None), with the baseline(s) launched again after every `baseline_every` other launches.
    closing: the baseline(s) once more, run after everything else (a step search, the finalists).
    No baseline again when baseline_every is 0 or nothing is compared with it.
    """
    rng = random.Random(f"{seed}:{host_key}") if seed is not None else None
    baselines = [cid for cid, spec in configs if not spec]
    speculative = {cid: spec for cid, spec in configs}
    again = baseline_every > 0 and len(baselines) < len(configs)
    next_launch = {cid: launches + 1 for cid in baselines}
    order: list[dict[str, Any]] = []
    since = 0
    for round_ in range(1, launches + 1):
        ids = [cid for cid, _ in configs]
        if rng is not None:
            rng.shuffle(ids)
        for cid in ids:
            order.append(slot(cid, round_, GRID, speculative[cid]))
            since = 0 if not speculative[cid] else since + 1
            if again and since >= baseline_every:
                order += [slot(b, next_launch[b], CHECK, False) for b in baselines]
                next_launch.update({b: next_launch[b] + 1 for b in baselines})
                since = 0
    closing = [slot(b, next_launch[b], CHECK, False) for b in baselines] if again else []
    return order, closing
