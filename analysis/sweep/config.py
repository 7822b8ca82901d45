"""One sweep config (a grid point): its fields, its id, what makes it valid, and its environment.

The one owner of what a config is. The plan builds configs here, the engines render them, the fact
schema stores them, the loader, the tables and the history take their columns from COLUMNS, and
the JSONL reader parses file names back with `parse_id`. A new axis is a field here (with its id
part and its rules), its rendering in each engine that has it (analysis.engines), and a test.

The shape rules (steps, topk, draft tokens) are checked here; what an engine can run is its own
(analysis.engines: each engine's `problems`, and the axes it has).
"""

from __future__ import annotations

import itertools
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from analysis.engines import DEFAULT, ENGINES, NAMES, with_axis

DEFAULT_PROFILE = "default"

# File-safe names (config ids, env profiles, sweep ids). \Z, not $: "$" also matches before a
# trailing newline.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Axis:
    """A field of Config a sweep varies (`-e <name>=...`): its id part, its values' type, the
    engines that have it. Speculative configs only: the baseline is each engine's default server."""

    name: str
    tag: str  # the id part: s2, -k4, -d8, -ov0
    kind: type  # int or bool (a bool is written 0/1 in the id)
    engines: tuple[str, ...]
    default: tuple[Any, ...]
    help: str


AXES: tuple[Axis, ...] = (
    Axis("steps", "s", int, NAMES, (1,), "speculative step counts: 2, 1,2,4 or 1..10 (llama.cpp: n-max)"),
    Axis("topk", "k", int, with_axis("topk"), (), "SGLang --speculative-eagle-topk values; empty = 1"),
    Axis(
        "draft_tokens",
        "d",
        int,
        with_axis("draft_tokens"),
        (),
        "SGLang --speculative-num-draft-tokens; empty = steps+1",
    ),
    Axis(
        "overlap_schedule",
        "ov",
        bool,
        with_axis("overlap_schedule"),
        (),
        "SGLang's overlap scheduler on/off; empty = its choice",
    ),
)
# The axes after the id's head (s<steps>), each named in the id when it is set.
_PARTS = AXES[1:]


class Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One point of the sweep grid; `id` names its result file and is derived from the fields."""

    id: str
    speculative: bool
    algorithm: str | None = None
    steps: int | None = None
    topk: int | None = None
    draft_tokens: int | None = None
    overlap_schedule: bool | None = None
    # SGLang's adaptive speculation: the server switches step counts per batch size at run time,
    # from a schedule file; `steps` is the count it starts from.
    adaptive: bool = False
    env_profile: str = DEFAULT_PROFILE

    def __post_init__(self) -> None:
        # The id cannot name these ("sNone", a "baseline" with steps), and engines would render them.
        if self.speculative and self.steps is None and not self.adaptive:
            raise ValueError("steps: required when speculative is true")
        if not self.speculative:
            fields = ("algorithm", *(a.name for a in AXES))
            given = [n for n in fields if getattr(self, n) is not None]
            if given or self.adaptive:
                raise ValueError(f"{(given or ['adaptive'])[0]}: must be unset when speculative is false")
        made = config_id(
            self.steps, env_profile=self.env_profile, speculative=self.speculative, adaptive=self.adaptive,
            **{a.name: getattr(self, a.name) for a in _PARTS},
        )  # fmt: skip
        if self.id != made:
            raise ValueError(f"config id {self.id!r} does not name its fields (they make {made!r})")

    @property
    def point(self) -> tuple[Any, ...]:
        """The grid point without its env profile: what one step-count comparison varies."""
        return tuple(getattr(self, name) for name in POINT)


# The columns a config contributes to every table row (its id is `config_id` there), and the grid
# point without the env profile (the env-profile view compares one point across profiles).
COLUMNS: tuple[str, ...] = tuple(f for f in Config.__struct_fields__ if f != "id")
POINT: tuple[str, ...] = tuple(f for f in COLUMNS if f != "env_profile")
# Python type of each column (a nullable field's non-null type), for frames and SQL columns.
COLUMN_TYPES: dict[str, type] = {
    f.name: next(a for a in (*typing.get_args(f.type), f.type) if a in (bool, int, str))
    for f in msgspec.structs.fields(Config)
    if f.name in COLUMNS
}

# An id: the head (baseline, adaptive or s<steps>), the set axes in AXES order, then +<env_profile>;
# an adaptive config is "adaptive" whatever it starts from (one per env profile).
_ID_RE = re.compile(
    r"(?:baseline|(?P<adaptive>adaptive)|s(?P<steps>\d+)"
    + "".join(rf"(?:-{a.tag}(?P<{a.name}>\d+))?" for a in _PARTS)
    + r")(?:\+(?P<env_profile>[A-Za-z0-9][A-Za-z0-9._-]*))?"
)


def config_id(
    steps: int | None,
    topk: int | None = None,
    draft_tokens: int | None = None,
    env_profile: str = DEFAULT_PROFILE,
    speculative: bool | None = None,
    adaptive: bool = False,
    **axes: Any,
) -> str:
    """File-safe name of a grid point: baseline, s2, s5-k4-d8, s2-ov0, s2+nccl_ll_ring, adaptive."""
    if speculative is None:
        speculative = steps is not None or adaptive
    values = {"topk": topk, "draft_tokens": draft_tokens, **axes}
    if adaptive:
        head = "adaptive"
    elif speculative:
        parts = (f"-{a.tag}{int(values[a.name])}" for a in _PARTS if values.get(a.name) is not None)
        head = f"s{steps}" + "".join(parts)
    else:
        head = "baseline"
    return head if env_profile == DEFAULT_PROFILE else f"{head}+{env_profile}"


def parse_id(text: str) -> dict[str, Any]:
    """The fields an id names (algorithm is not part of it); ValueError when it is not an id."""
    match = _ID_RE.fullmatch(text)
    if not match:
        raise ValueError(
            f"config id {text!r} is not baseline, s<steps> or s<steps>-k<topk>-d<draft> "
            "(optionally +<env_profile>)"
        )
    values = {a.name: None if match[a.name] is None else a.kind(int(match[a.name])) for a in AXES}
    adaptive = match["adaptive"] is not None
    return {
        "id": text,
        "speculative": values["steps"] is not None or adaptive,
        "algorithm": None,
        **values,
        "adaptive": adaptive,
        "env_profile": match["env_profile"] or DEFAULT_PROFILE,
    }


def make(
    steps: int | None = None,
    topk: int | None = None,
    draft_tokens: int | None = None,
    algorithm: str | None = None,
    env_profile: str = DEFAULT_PROFILE,
    adaptive: bool = False,
    **axes: Any,
) -> Config:
    """A config from its fields; `steps` None is the baseline (no speculation); an adaptive config
    starts from `steps`; `axes`: the values of AXES beyond steps, topk and draft tokens."""
    speculative = steps is not None
    return Config(
        id=config_id(steps, topk, draft_tokens, env_profile, speculative, adaptive, **axes),
        speculative=speculative,
        algorithm=algorithm if speculative else None,
        steps=steps,
        topk=topk,
        draft_tokens=draft_tokens,
        adaptive=adaptive,
        env_profile=env_profile,
        **axes,
    )


def from_id(text: str, algorithm: str | None = None) -> Config:
    """The config an id names, with `algorithm` (not part of the id); ValueError when it is not an id."""
    fields = parse_id(text)
    for name in ("id", "speculative", "algorithm"):
        fields.pop(name)
    return make(algorithm=algorithm, **fields)


# ---------------------------------------------------------------------------------------------
# Validity: engine-independent, then per engine. Each problem is "<variable>: <sentence>".
# ---------------------------------------------------------------------------------------------


def shape_problems(steps: int, topk: int | None, draft_tokens: int | None) -> list[str]:
    """Why (steps, topk, draft tokens) cannot be a speculative grid point, on any engine."""
    if draft_tokens is not None and topk is None:
        return ["draft_tokens: needs topk (SGLang takes steps, topk and draft tokens together)"]
    if topk is None or draft_tokens is None:
        return []
    most = steps * topk + 1  # the root plus a full tree of `steps` levels, `topk` wide
    if draft_tokens > most:
        return [
            f"draft_tokens: {draft_tokens} > steps*topk+1 = {most} (the extra tokens can never be drafted)"
        ]
    if topk == 1 and draft_tokens != steps + 1:
        forced = steps + 1
        return [f"draft_tokens: with topk 1, SGLang forces it to steps+1 = {forced}, not {draft_tokens}"]
    if draft_tokens < 2:
        return ["draft_tokens: must be at least 2 (the root plus one drafted token)"]
    return []


def engine_problems(config: Config, engine: str) -> list[str]:
    """Why an engine cannot run this config: an axis it does not have, then its own rules."""
    if engine not in ENGINES:
        return [f"specsweep_engine: {engine!r} is not one of: {', '.join(NAMES)}"]
    if not config.speculative:
        return []
    problems = [
        f"{a.name}: applies to {', '.join(a.engines)} only, not to {engine}"
        for a in AXES
        if getattr(config, a.name) is not None and engine not in a.engines
    ]
    return problems + ENGINES[engine].problems(config)


# ---------------------------------------------------------------------------------------------
# The grid
# ---------------------------------------------------------------------------------------------


class GridError(ValueError):
    """A request that makes no valid grid; the message starts with the variable's name."""


def grid(
    axes: Mapping[str, Sequence[Any]],
    *,
    baseline: bool = True,
    algorithm: str | None = None,
    env_profiles: Sequence[str] = (),
    engines: Sequence[str] = (DEFAULT,),
) -> tuple[list[Config], list[str]]:
    """The configs of a request, and a warning per grid cell left out (pointless or invalid).

    axes: values per AXES name (an empty list leaves that axis to the engine). Raises GridError when
    the request itself is wrong (topk without steps, a knob an engine of the targeted hosts does
    not have) or leaves nothing valid to sweep.
    """
    steps, topk, draft_tokens = (list(axes.get(name) or []) for name in ("steps", "topk", "draft_tokens"))
    unset = [a.name for a in _PARTS if axes.get(a.name)]
    if unset and not steps:
        raise GridError(f"{unset[0]}: given without steps (every speculative config has a step count)")
    if draft_tokens and not topk:
        raise GridError("draft_tokens: needs topk (SGLang takes steps, topk and draft tokens together)")
    configs: list[Config] = []
    warnings: list[str] = []
    more = AXES[3:]  # axes with no rule between them and the draft tree
    cells = list(
        itertools.product(
            steps, topk or [None], draft_tokens or [None], *(axes.get(a.name) or [None] for a in more)
        )
    )
    for profile in env_profiles or [DEFAULT_PROFILE]:
        if baseline:
            configs.append(make(env_profile=profile))
        for s, k, d, *rest in cells:
            if k is not None and d is None:
                if k != 1:
                    raise GridError(f"draft_tokens: required when topk is {k} (steps {s})")
                d = s + 1  # what SGLang forces for topk 1
            config = make(s, k, d, algorithm, profile, **{a.name: v for a, v in zip(more, rest, strict=True)})
            problems = shape_problems(s, k, d)
            if not problems:
                problems = [p for e in engines for p in engine_problems(config, e)]
            if problems and (len(cells) == 1 or not problems[0].startswith("draft_tokens")):
                raise GridError(problems[0])  # asked for exactly, or wrong on every cell
            if problems:
                warnings.append(
                    f"skipped steps={s} topk={k} draft_tokens={d}: {problems[0].split(': ', 1)[1]}"
                )
                continue
            configs.append(config)
    if not configs:
        detail = f": {warnings[0].split(': ', 1)[1]}" if warnings else ""
        raise GridError(f"steps/topk/draft_tokens: nothing valid to sweep{detail}")
    # Warnings repeat once per profile; say each once.
    return configs, list(dict.fromkeys(warnings))


# ---------------------------------------------------------------------------------------------
# Environment
# ---------------------------------------------------------------------------------------------


def env_value(key: str, value: Any) -> str:
    """One environment value as text; booleans are 1/0, which is what C readers expect."""
    if isinstance(value, bool):
        text = "1" if value else "0"
    elif isinstance(value, (str, int, float)):
        text = str(value)
    else:
        raise ValueError(f"{key}: value must be a string or number, got {type(value).__name__}")
    if "\n" in text or "\0" in text:
        raise ValueError(f"{key}: value must not contain a newline or NUL")
    return text


def merge_env(base: Mapping[str, Any] | None, profile: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The server's environment: `base` with an env profile's values over it (str -> str).

    A null value in the profile removes that key from the base, so a profile can return to a
    library default (e.g. drop NCCL_ALGO); a null in the base is an error.
    """
    merged: dict[str, str] = {}
    for source, layer in (("env", base), ("env profile", profile)):
        if layer is None:
            continue
        if not isinstance(layer, Mapping):
            raise ValueError(f"{source}: must be a mapping, got {type(layer).__name__}")
        for key, value in layer.items():
            if not isinstance(key, str) or not _ENV_KEY.fullmatch(key):
                raise ValueError(f"{key!r}: not a valid environment variable name")
            if value is None:
                if source == "env":
                    raise ValueError(f"{key}: value is null")
                merged.pop(key, None)
            else:
                merged[key] = env_value(key, value)
    return merged
