"""Point labels of the recall/latency plots (issue "Output a DBA can trust", item 6): labels of
close points never overlap, and each stays inside the figure."""

from __future__ import annotations

import itertools

import pytest


def test_labels_of_close_points_do_not_overlap():
    pytest.importorskip("matplotlib")
    from evaluator.core import figures as plots

    pts = [
        (1.0 + i * 0.01, 0.95 + i * 0.001, f"ef_search={10 * i},iterative_scan=off")
        for i in range(6)
    ]
    pts += [(1.011, 0.9511, "ef_search=11"), (1.0105, 0.95105, "ef_search=12")]
    fig = plots.figure(7.5, 4.6)
    ax = fig.add_subplot()
    ax.plot([p[0] for p in pts], [p[1] for p in pts], "o")
    plots.place_labels(ax, pts)
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert sorted(t.get_text() for t in ax.texts) == sorted(p[2] for p in pts)
    assert not any(a.overlaps(b) for a, b in itertools.combinations(boxes, 2))
    whole = fig.bbox
    assert all(whole.x0 <= b.x0 and b.x1 <= whole.x1 for b in boxes)
