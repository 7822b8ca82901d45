"""Env-profile view: each step count's tok/s and step time under every env profile, side by side.

A profile (NCCL settings and the like) moves every config, the baseline included: the seed case's
question was "does LL + Ring cut the verify step, and does it move the best step count?". The step
table lists each (config, profile) as a row of its own; this view puts one grid point per row and
one column group per profile, in the comparison groups that measured more than one profile.
"""

from __future__ import annotations

import pandas as pd

from analysis.report.compare import GROUP
from analysis.sweep import config

# What makes two configs the same grid point under different profiles.
POINT = config.POINT
METRICS = ["decode_tps", "step_ms"]


def profile_order(profiles: list[str]) -> list[str]:
    """`default` first (the suite's own settings), then by name."""
    return sorted(set(profiles), key=lambda p: (p != "default", p))


def point_label(config: str, profile: str) -> str:
    """A config id without its profile (`s2+nccl_ll_ring` -> `s2`): how the sweep names configs."""
    suffix = f"+{profile}"
    return config[: -len(suffix)] if config.endswith(suffix) else config


def profile_table(step: pd.DataFrame) -> pd.DataFrame:
    """Wide table: one row per (group, grid point), columns (metric, profile) for METRICS.

    Only groups with more than one profile; rows in step-table order (baseline first, then by step
    count), profiles `default` first. The index is GROUP plus `config`, the point's config id
    without the profile suffix (the first one seen when the sweep named a point differently under
    different profiles). Several configs at one point and profile (same settings, other ids): the
    first one's numbers, as the table orders them.
    """
    several = step.groupby(GROUP, dropna=False, sort=False)["env_profile"].transform("nunique") > 1
    rows = step[several]
    if rows.empty:
        index = pd.MultiIndex.from_arrays([[]] * (len(GROUP) + 1), names=[*GROUP, "config"])
        columns = pd.MultiIndex.from_product([METRICS, []], names=[None, "env_profile"])
        return pd.DataFrame(index=index, columns=columns, dtype="float64")
    point = rows.groupby([*GROUP, *POINT], dropna=False, sort=False).ngroup().rename("point")
    pairs = zip(rows["config"].tolist(), rows["env_profile"].tolist(), strict=True)
    labels = [point_label(str(c), str(p)) for c, p in pairs]
    keys = rows[GROUP].assign(config=labels, point=point).drop_duplicates("point").set_index("point")
    values = rows[METRICS].set_index([point, rows["env_profile"].astype(str)])
    wide = values[~values.index.duplicated()].unstack("env_profile")
    profiles = profile_order(rows["env_profile"].astype(str).unique().tolist())
    wide = wide.reindex(columns=pd.MultiIndex.from_product([METRICS, profiles], names=[None, "env_profile"]))
    wide.index = pd.MultiIndex.from_frame(keys.loc[wide.index])
    return wide.astype("float64")
