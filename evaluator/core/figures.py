"""The one matplotlib canvas every PNG of pgeval is drawn on: the Agg canvas (no display, no pyplot
global state). matplotlib is optional (`pip install matplotlib`, or the clone's plot extra): :func:`available` says whether
it is there; report plots and the sweep plot draw on :func:`figure` and encode with :func:`png`."""

from __future__ import annotations

import importlib.util
import io
import warnings
from typing import Any


def available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def needed() -> None:
    """A plot asked for (``--plot``): an InputError naming it unless matplotlib is installed."""
    from .errors import InputError, param

    if not available():
        raise InputError(
            f"{param('plot')} needs matplotlib: pip install matplotlib (or the clone's plot "
            "extra: pip install -e '.[plot]')",
            field=param("plot"),
        )


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


# where a point's label may go, in points from the dot: right below, right above, left below,
# left above, further below, further above
OFFSETS: tuple[tuple[int, int, str], ...] = (
    (5, -11, "left"),
    (5, 5, "left"),
    (-5, -11, "right"),
    (-5, 5, "right"),
    (5, -22, "left"),
    (5, 16, "left"),
    (-5, -22, "right"),
    (-5, 16, "right"),
)


def place_labels(ax: Any, points: list[tuple[float, float, str]]) -> None:
    """Label each point where its text overlaps no label placed before it and no point (the
    first offset that is free, on the side towards the middle; the first offset when none is),
    so that close points stay readable."""
    fig = ax.figure
    fig.canvas.draw()  # the axes' final limits: where each label lands is known only then
    ax.set_autoscale_on(False)
    renderer = fig.canvas.get_renderer()
    from matplotlib.transforms import Bbox

    # the points themselves are in the way too: a label never covers another point's dot
    dots = [ax.transData.transform((x, y)) for x, y, _ in points]
    placed: list = [Bbox.from_extents(px - 4, py - 4, px + 4, py + 4) for px, py in dots]
    for x, y, text in sorted(points, key=lambda p: (p[0], -p[1])):
        chosen = None
        # points in the right half try the left side first: labels stay inside the axes
        right = ax.transAxes.inverted().transform(ax.transData.transform((x, y)))[0] > 0.5
        for dx, dy, ha in sorted(OFFSETS, key=lambda o: (o[2] == "left") == right):
            ann = ax.annotate(
                text, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=7, ha=ha
            )
            box = ann.get_window_extent(renderer).expanded(1.05, 1.1)
            if not any(box.overlaps(other) for other in placed):
                chosen = (ann, box)
                break
            ann.remove()
        if chosen is None:  # crowded everywhere: the first place
            dx, dy, ha = OFFSETS[2] if right else OFFSETS[0]
            ann = ax.annotate(
                text, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=7, ha=ha
            )
            chosen = (ann, ann.get_window_extent(renderer))
        placed.append(chosen[1])


def svg(fig: Any, titles: dict[str, str]) -> str:
    """``fig`` as an inline ``<svg>`` element (no XML header, no external reference: a page
    embeds it as it is) in which each artist whose gid is a key of ``titles`` carries that text
    as its ``<title>``: the browser shows it on hover."""
    import xml.etree.ElementTree as ET

    ns = "http://www.w3.org/2000/svg"
    ET.register_namespace("", ns)
    ET.register_namespace("xlink", "http://www.w3.org/1999/xlink")
    import matplotlib

    buf = io.StringIO()
    # text as text (searchable, read by screen readers, smaller than glyph paths)
    with warnings.catch_warnings(), matplotlib.rc_context({"svg.fonttype": "none"}):
        warnings.simplefilter("ignore")
        fig.savefig(buf, format="svg", metadata={"Date": None})
    root = ET.fromstring(buf.getvalue())
    for meta in root.findall(f"{{{ns}}}metadata"):  # matplotlib's RDF record: URLs, no figure
        root.remove(meta)
    for node in root.iter():
        text = titles.get(node.get("id") or "")
        if text is not None:
            title = ET.Element(f"{{{ns}}}title")
            title.text = text
            node.insert(0, title)
    root.set("role", "img")
    width = root.get("width")
    if width:  # scales down with the page, never up past its own size
        root.set("style", f"max-width:{width};height:auto")
        root.attrib.pop("height", None)
        root.set("width", "100%")
    text = ET.tostring(root, encoding="unicode")
    # inline in HTML the namespaces are implied: no URL left in the page (self-contained)
    for decl in (
        ' xmlns="http://www.w3.org/2000/svg"',
        ' xmlns:xlink="http://www.w3.org/1999/xlink"',
    ):
        text = text.replace(decl, "")
    return text.replace("xlink:href=", "href=")
