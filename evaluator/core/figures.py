"""The one matplotlib canvas every PNG of pgeval is drawn on: the Agg canvas (no display, no pyplot
global state). matplotlib is optional (`pip install pgeval[plot]`): :func:`available` says whether
it is there; report plots and the sweep plot draw on :func:`figure` and encode with :func:`png`."""

from __future__ import annotations

import importlib.util
import io
import warnings
from typing import Any


def available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def figure(width: float = 7.5, height: float = 3.6) -> Any:
    """A matplotlib Figure of ``width`` x ``height`` inches at 100 dpi, laid out by matplotlib."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png(fig: Any) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. a CJK query type the default font lacks
        fig.savefig(buf, format="png")
    return buf.getvalue()
