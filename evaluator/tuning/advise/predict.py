"""A screened design's work setting carried to the table's size by the index in place's gap
(docs/advise.md, "A large table"): labelled as a prediction, with its interval, never as a
measurement.

The setting a sample of rows needs is not the table's (one clustered 384-d data set: ef_search
88 on 100,000 rows, 892 on 1,000,000). The anchor (the design the table has) is measured both on
the sample and in place, so its gap is known: ``table / sample``. A design searched by the same
work setting (hnsw and hnsw-halfvec by ``hnsw.ef_search``; ivfflat and ivfflat-halfvec by
``ivfflat.probes``) is carried by that ratio; a design with another setting (bq.candidates,
diskann.query_rescore) is not: nothing ties its curve to the anchor's.

The interval multiplies the ends of the three 95 % setting intervals (over resamples of the
queries): low = design_low × anchor_table_low / anchor_sample_high, high = design_high ×
anchor_table_high / anchor_sample_low (None: above every value measured). It holds the three
measurements' noise, not the model's error: ``bench/advise_scale.py --full`` checks the carried
value against the design built in full."""

from __future__ import annotations

import math
from typing import Any


def _ends(row: dict[str, Any], find: str) -> tuple[float, float | None, float | None] | None:
    """(value, interval low, interval high) of a row's found setting (None: not reached)."""
    value = (row.get("setting") or {}).get(find)
    if not row.get("reached") or value is None:
        return None
    iv = row.get("setting_interval") or {}
    low, high = iv.get("low"), iv.get("high")
    return float(value), None if low is None else float(low), None if high is None else float(high)


def carried(
    design: dict[str, Any],
    anchor_sample: dict[str, Any],
    anchor_table: dict[str, Any],
    find: str,
    anchor_label: str,
    sample_rows: int,
) -> dict[str, Any] | None:
    """The design's setting predicted on the table (None: not predictable: another setting, or
    a figure that did not reach the target): ``{setting, value, low, high, ratio, from}``."""
    d = _ends(design, find)
    s = _ends(anchor_sample, find)
    a = _ends(anchor_table, find)
    if d is None or s is None or a is None or s[0] <= 0:
        return None
    ratio = a[0] / s[0]
    low = None if d[1] is None or a[1] is None or not s[2] else int(d[1] * a[1] / s[2])
    high = None if d[2] is None or a[2] is None or not s[1] else math.ceil(d[2] * a[2] / s[1])
    short = find.split(".", 1)[-1]
    return {
        "setting": find,
        "value": max(1, round(d[0] * ratio)),
        "low": low,
        "high": high,
        "ratio": ratio,
        "from": (
            f"{anchor_label}'s gap: {short} {s[0]:g} on {sample_rows:,} rows, {a[0]:g} on the "
            f"table (x{ratio:.2g})"
        ),
    }


def text(p: dict[str, Any]) -> str:
    """``predicted on the table: ef_search about 892 (95 % interval 697–above every value
    measured), carried by hnsw m=16's gap ...: a prediction, not a measurement``."""
    short = p["setting"].split(".", 1)[-1]
    low = "?" if p["low"] is None else f"{p['low']:,}"
    high = "above every value measured" if p["high"] is None else f"{p['high']:,}"
    return (
        f"predicted on the table: {short} about {p['value']:,} (95 % interval {low}–{high}), "
        f"carried by {p['from']}: a prediction, not a measurement"
    )
