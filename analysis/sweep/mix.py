"""A traffic mix as the operator writes it (`-e mix`, `--mix`): workload=share pairs -> shares.

Below both the sweep's request (which checks `-e mix` before any host is touched) and the report's
mix table (analysis.report.mix), so planning does not pull in the report's tables.
"""

from __future__ import annotations

import math


class MixError(ValueError):
    """A mix that cannot be read or weighed on these results."""


def parse(text: str, option: str = "--mix", zero: bool = True) -> dict[str, float]:
    """'chat=0.7,code=0.3' -> shares summing to 1; MixError, naming `option`, says what is wrong.

    zero: a share of 0 drops its workload (the report's --mix); False refuses it (the sweep's `mix`,
    where a workload measured for no traffic is a mistake in the request).
    """
    shares: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, eq, value = part.partition("=")
        try:
            share = float(value) if eq else float("nan")
        except ValueError:
            share = float("nan")
        if not name.strip() or not (share >= 0 if zero else share > 0) or math.isinf(share):
            least = "" if zero else ", each share above 0"
            raise MixError(f"{option}: {part!r} is not workload=share (e.g. chat=0.7,code=0.3{least})")
        shares[name.strip()] = shares.get(name.strip(), 0.0) + share
    total = sum(shares.values())
    if not shares or total <= 0:
        raise MixError(f"{option}: give at least one workload a share above 0")
    return {name: share / total for name, share in shares.items() if share > 0}
