"""The Prometheus text exposition format (and OpenMetrics' text format, which it is a subset of
for gauges): ``# HELP`` and ``# TYPE`` lines per metric family, then one ``name{labels} value``
line per sample, ending with ``# EOF``. A probe's output can be scraped through node_exporter's
textfile collector (docs/watch.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Family:
    name: str
    help: str
    samples: list[tuple[dict, float]] = field(default_factory=list)
    type: str = "gauge"


def label_value(value: object) -> str:
    """A label value escaped as the format requires: backslash, double quote, newline."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def render(families: list[Family]) -> str:
    lines = []
    for fam in families:
        if not fam.samples:
            continue
        lines.append(f"# HELP {fam.name} {fam.help}")
        lines.append(f"# TYPE {fam.name} {fam.type}")
        for labels, value in fam.samples:
            inner = ",".join(f'{k}="{label_value(v)}"' for k, v in labels.items())
            lines.append(f"{fam.name}{{{inner}}} {number(value)}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"
