"""Shared figure plumbing for the plots: PNG bytes, fixed margins, family names."""

from __future__ import annotations

import io
import re
from typing import Any

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 100


def png(fig: Figure) -> bytes:
    """The figure as PNG bytes, metadata stripped (the same table gives the same bytes)."""
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    # zlib level 3: these flat-coloured charts come out about as small as at the default 6, in half
    # the time (encoding is a tenth of what a figure costs).
    options = {"compress_level": 3}
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None}, pil_kwargs=options)
    return buf.getvalue()


def layout(fig: Figure, left: float, right: float, top: float, bottom: float) -> None:
    """Fixed margins in inches (tight_layout would lay every text out once more: a third of the cost)."""
    w, h = fig.get_size_inches()
    fig.subplots_adjust(left=left / w, right=1 - right / w, top=1 - top / h, bottom=bottom / h)


def legend_inches(ax: Any) -> float:
    """Inches a right-hand legend at font size 8 needs: handle plus its longest label."""
    labels = ax.get_legend_handles_labels()[1]
    return 0.75 + 0.062 * max((len(x) for x in labels), default=0)


def slug(key: tuple[object, ...]) -> str:
    """A file-name-safe name for a family (sweep, engine, model, workload, concurrency)."""
    sweep, engine, model, workload, conc = key
    load = "" if pd.isna(workload) else f"_{workload}"
    text = f"{sweep}_{engine}_{str(model).rstrip('/').rsplit('/', 1)[-1]}{load}_c{conc}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text)


def title(key: tuple[object, ...]) -> str:
    """A family as a figure title."""
    sweep, engine, model, workload, conc = key
    load = "" if pd.isna(workload) else f" · {workload}"
    return f"{sweep} · {engine} {str(model).rstrip('/').rsplit('/', 1)[-1]}{load} · concurrency {conc}"
