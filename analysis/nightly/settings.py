"""What `regress` counts as a regression: one settings object shared by the rules and the reports."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Rule = Literal["change_point", "window", "either"]
RULES: tuple[Rule, ...] = ("change_point", "window", "either")


@dataclass(frozen=True)
class Settings:
    """The two tok/s rules, which of them decides, and the acceptance-collapse gate."""

    # Window rule: the latest night against the median of the previous `window` nights of the same
    # engine version; a drop beyond both `threshold` and mad_k x MAD of those nights. `window` is
    # also how long a change point's new segment stays news (regressed/improved), in nights.
    window: int = 5
    threshold: float = 0.05
    mad_k: float = 3.0
    # Change-point rule: E-divisive means over the cell's last `nights` nights, Student's t p-value
    # at most `alpha` and a change of at least `min_change` (a share) on each side of a change point.
    alpha: float = 0.003
    min_change: float = 0.02
    nights: int = 60
    # change_point: the change-point rule decides, the window rule too while a cell has few nights
    # (analysis.nightly.judge.YOUNG_NIGHTS); window: the window rule alone; either: both, always.
    rule: Rule = "change_point"
    # Gate: a speculative cell whose latest accept length is below this, or below (1 - accept_drop)
    # x the median of its previous `window` nights, is regressed whatever tok/s did.
    min_accept_length: float = 1.2
    accept_drop: float = 0.2

    def as_dict(self) -> dict[str, Any]:
        """The settings as plain values (for the JSON output)."""
        return asdict(self)
