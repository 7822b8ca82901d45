"""What each SGLang release accepts of what specsweep renders: flag spellings and adaptive schedule keys.

The one owner of SGLang's version differences. Each row starts at the first release that has it
and holds until the next row; every value is read from that release's wheel (`pip download
--no-deps sglang==X`) or, for `main`, from sgl-project/sglang after 0.5.23, at the file cited.
Versions below the first row are not in the table, and are refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The adaptive keys one batch size's entry (or the file's top level, merged into every entry by
# AdaptiveSpeculativeParams: `cfg={**cfg, **entry}`) is read for, 0.5.13 on.
_SLOT_KEYS = frozenset(
    {"candidate_steps", "up_hysteresis", "down_hysteresis", "ceiling_coeff", "ema_alpha", "warmup_batches",
     "update_interval"}
)  # fmt: skip
# SGLang's built-in schedule (DEFAULT_ADAPTIVE_CONFIG), candidate steps by batch size.
_BUILTIN_0_5_13 = {1: (1, 3, 7), 8: (1, 3), 32: (1,)}
_BUILTIN_0_5_14 = {1: (1, 3, 7), 8: (0, 1, 3), 32: (0, 1), 64: (0,)}
_BUILTIN_0_5_20 = {1: (1, 3, 5, 7), 8: (0, 1, 3), 32: (0, 1), 64: (0,)}


@dataclass(frozen=True)
class Release:
    """What SGLang releases from `since` on (up to the next row) accept of what specsweep renders."""

    since: str  # first release with this row ("main": after the last release in the table)
    graph_max_bs_flag: str  # the largest decode batch captured as a CUDA graph
    graph_bs_flag: str  # the decode batch sizes captured, as a list
    # Keys the adaptive schedule file is read for (top level and per batch size), () without
    # a per-batch-size schedule: specsweep's schedule (digit batch-size keys) would be ignored.
    adaptive_keys: frozenset[str]
    adaptive_top_keys: frozenset[str]  # keys read at the file's top level only
    builtin_schedule: Mapping[int, tuple[int, ...]]  # batch size -> candidate steps; {} without one
    source: str  # where the row's values are read, in that release's wheel


RELEASES = (
    Release(
        "0.5.1",
        "--cuda-graph-max-bs",
        "--cuda-graph-bs",
        frozenset(),
        frozenset(),
        {},
        "sglang 0.5.1..0.5.10 srt/server_args.py (add_argument --cuda-graph-max-bs, --cuda-graph-bs "
        "nargs='+'); no --speculative-adaptive",
    ),
    Release(
        "0.5.11",
        "--cuda-graph-max-bs",
        "--cuda-graph-bs",
        frozenset(),
        frozenset(),
        {},
        "sglang 0.5.11 srt/speculative/adaptive_spec_params.py load_adaptive_config: one flat schedule "
        "(candidate_steps, ema_alpha, ... at the top level), batch-size keys never read",
    ),
    Release(
        "0.5.13",
        "--cuda-graph-max-bs",
        "--cuda-graph-bs",
        _SLOT_KEYS,
        frozenset(),
        _BUILTIN_0_5_13,
        "sglang 0.5.13 srt/speculative/adaptive_spec_params.py _load_adaptive_config (digit keys), "
        "AdaptiveStepSlot cfg.get(...), DEFAULT_ADAPTIVE_CONFIG",
    ),
    Release(
        "0.5.14",
        "--cuda-graph-max-bs-decode",
        "--cuda-graph-bs-decode",
        _SLOT_KEYS,
        frozenset(),
        _BUILTIN_0_5_14,
        "sglang 0.5.14 srt/server_args.py: --cuda-graph-max-bs-decode/--cuda-graph-bs-decode, the old "
        "spellings kept as DeprecatedAliasStoreAction; adaptive_spec_params.py DEFAULT_ADAPTIVE_CONFIG",
    ),
    Release(
        "0.5.20",
        "--cuda-graph-max-bs-decode",
        "--cuda-graph-bs-decode",
        _SLOT_KEYS,
        frozenset(),
        _BUILTIN_0_5_20,
        "sglang 0.5.20 srt/arg_groups/fields/exec_.py ExecGraph (no --cuda-graph-max-bs alias: that "
        "prefix is ambiguous, exit 2); adaptive_spec_params.py DEFAULT_ADAPTIVE_CONFIG; same in 0.5.23",
    ),
    Release(
        "main",
        "--cuda-graph-max-bs-decode",
        "--cuda-graph-bs-decode",
        _SLOT_KEYS,
        frozenset({"strategy"}),
        _BUILTIN_0_5_20,
        "sgl-project/sglang main python/sglang/srt/speculative/adaptive_spec_params.py "
        "resolve_adaptive_strategy (top-level 'strategy': ema | throughput_aware)",
    ),
)
LAST_RELEASE = "0.5.23"  # newer versions (0.5.24, a dev build of main) get the `main` row


class ReleaseError(ValueError):
    """An SGLang version the table has no row for."""


def _key(version: str) -> tuple[int, int, int]:
    """(0, 5, 23) of '0.5.23', '0.5.15.post1', '0.5.23.dev12+gabc'."""
    found = re.match(r"^v?(\d+)\.(\d+)\.(\d+)", str(version).strip())
    if not found:
        raise ReleaseError(f"{version!r} is not an SGLang version (expected e.g. 0.5.23)")
    major, minor, patch = (int(g) for g in found.groups())
    return major, minor, patch


def release(version: str) -> Release:
    """The row of `version`."""
    if version == "main":
        return RELEASES[-1]
    key = _key(version)
    if key > _key(LAST_RELEASE):
        return RELEASES[-1]
    rows = [r for r in RELEASES[:-1] if _key(r.since) <= key]
    if not rows:
        oldest = RELEASES[0].since
        raise ReleaseError(
            f"SGLang {version} is older than {oldest}, the oldest release specsweep renders for"
        )
    return rows[-1]


def ignored_keys(version: str, schedule: Mapping[str, Any]) -> list[str]:
    """The keys of an adaptive schedule file that SGLang `version` never reads ('8.strategy' for a
    batch-size entry's key); every key when that version has no per-batch-size schedule."""
    row = release(version)
    if not row.adaptive_keys:
        return sorted(schedule)
    ignored = [k for k in schedule if not k.isdigit() and k not in row.adaptive_keys | row.adaptive_top_keys]
    for size, entry in schedule.items():
        if size.isdigit() and isinstance(entry, Mapping):
            ignored += [f"{size}.{k}" for k in entry if k not in row.adaptive_keys]
    return ignored


def stops_speculating_at(schedule: Mapping[int, tuple[int, ...]]) -> int | None:
    """The smallest batch size from which every entry of a schedule has only 0 (no speculation) as
    candidate; None when it speculates at every batch size it names."""
    stops = None
    for size in sorted(schedule, reverse=True):
        if set(schedule[size]) != {0}:
            break
        stops = size
    return stops
