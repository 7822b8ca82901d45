"""What `regress` counts as a regression: one settings object shared by the rules and the reports."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

from analysis import objectives

Rule = Literal["change_point", "window", "either"]
RULES: tuple[Rule, ...] = ("change_point", "window", "either")
Noise = Literal["shared", "own"]
NOISES: tuple[Noise, ...] = ("shared", "own")
# The settings that are one of a few words, and those words.
CHOICES: dict[str, tuple[str, ...]] = {"rule": RULES, "noise": NOISES, "objective": objectives.NAMES}
# Fewer nights give a one-night segment at most one degree of freedom: the window rule judges them
# (analysis.nightly.judge), and the change-point rule needs at least this many to search.
MIN_NIGHTS = 4
# The recent-drop rule's nights at the new level, each tested (Settings.recent_alpha): two find most
# 5% drops at CV 2% on their second night; three find nearly all by the third.
RECENT_NIGHTS = (2, 3)
RECENT_TEXT = " or ".join(map(str, RECENT_NIGHTS))  # for help and reports: "2 or 3"
# What each number may be (the others are one of CHOICES): a check and how to say it.
LIMITS: dict[str, tuple[Callable[[float], bool], str]] = {
    "window": (lambda v: v >= 1, "at least 1"),
    "threshold": (lambda v: 0 <= v < 1, "a share from 0 to below 1"),
    "mad_k": (lambda v: v >= 0, "at least 0"),
    "alpha": (lambda v: 0 < v < 1, "a p-value above 0 and below 1"),
    "recent_alpha": (lambda v: 0 < v < 1, "a p-value above 0 and below 1"),
    "min_change": (lambda v: 0 <= v < 1, "a share from 0 to below 1"),
    "nights": (lambda v: v >= MIN_NIGHTS, f"at least {MIN_NIGHTS}"),
    "min_accept_length": (lambda v: v >= 0, "at least 0"),
    "accept_drop": (lambda v: 0 <= v < 1, "a share from 0 to below 1"),
}


@dataclass(frozen=True)
class Settings:
    """The tok/s rules (window; change points with the recent-drop test), which of them decides,
    and the acceptance-collapse gate."""

    # Window rule: the latest night against the median of the previous `window` nights of the same
    # engine version; a drop beyond both `threshold` and mad_k x MAD of those nights. `window` is
    # also how long a change point's new segment stays news (regressed/improved), in nights.
    window: int = 5
    threshold: float = 0.05
    mad_k: float = 3.0
    # Change-point rule: E-divisive means over the cell's last `nights` nights, Student's t p-value
    # at most `alpha` and a change of at least `min_change` (a share) on each side of a change point.
    alpha: float = 0.001
    min_change: float = 0.02
    nights: int = 60
    # Recent-drop rule, beside the change points (rule change_point or either): the last 2 or 3
    # nights (RECENT_NIGHTS) against the nights before them since the last change point, a tok/s
    # drop of at least `min_change` with one-sided Student's t p at most `recent_alpha` (each k),
    # shared out among tok/s and, for a speculative cell, its factors accept length and step time
    # (one that carries half of the drop may decide: its noise alone stands against it); the
    # variances moderated by the fleet's (analysis.nightly.noise). A change point needs about 3
    # nights at a new level to stand; this test finds most drops a night or two sooner.
    recent_alpha: float = 0.005
    # change_point: the change-point rule decides, the window rule too while a cell has few nights
    # (analysis.nightly.judge.YOUNG_NIGHTS); window: the window rule alone; either: both, always.
    rule: Rule = "change_point"
    # shared: the recent-drop test borrows the noise of the cells judged with it where they agree on
    # it (analysis.nightly.noise); own: each cell's nights alone, for a fleet whose cells are known
    # to differ (a shared noise lets a much noisier cell alarm a little more often).
    noise: Noise = "shared"
    # Gate: a speculative cell whose latest accept length is below this, or below (1 - accept_drop)
    # x the median of its previous `window` nights, is regressed whatever tok/s did.
    min_accept_length: float = 1.2
    accept_drop: float = 0.2
    # What a night's value of a cell is, and so what a regression is a drop of: the sweep's
    # objective (analysis.objectives), as the night's report and recommendation rank on it.
    objective: str = objectives.DEFAULT.name

    def __post_init__(self) -> None:
        problems = [problem for f in fields(self) if (problem := self._problem(f.name, f.default))]
        if problems:
            raise ValueError("; ".join(problems))

    def _problem(self, name: str, default: Any) -> str:
        """What is wrong with the setting `name`, or "" (an int default asks for a whole number)."""
        value = getattr(self, name)
        if name in CHOICES:
            words = CHOICES[name]
            return "" if value in words else f"{name} must be one of {', '.join(words)} (got {value!r})"
        whole = isinstance(default, int)
        number = isinstance(value, int if whole else int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value):
            return f"{name} must be {'a whole number' if whole else 'a number'} (got {value!r})"
        check, text = LIMITS[name]
        return "" if check(value) else f"{name} must be {text} (got {value!r})"

    @staticmethod
    def option(name: str) -> str:
        """The `regress` option of the setting `name` (the nightly passes its settings as these)."""
        return f"--{name.replace('_', '-')}"

    def as_dict(self) -> dict[str, Any]:
        """The settings as plain values (for the JSON output)."""
        return asdict(self)
