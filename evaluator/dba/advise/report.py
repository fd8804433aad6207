"""`pgeval advise --report FILE.html`: one self-contained page a DBA can sign: the recommendation
(or what binds), the statements to apply, every design's figures and the plot (recall against
p95 per design, marker size = index size, target line, recommended point)."""

from __future__ import annotations

import base64
from html import escape
from pathlib import Path

from ...reporting import html, plots

MB = 1048576.0


def rows(result: dict, *, short: bool = False) -> list[dict]:
    """One flat row per design x build (the command's table: ``short`` names; this page: all)."""
    out = []
    for r in result["designs"]:
        row = {
            "design": r["design"],
            "build": ",".join(f"{k}={v}" for k, v in r["build"].items()),
            "setting": ", ".join(
                f"{k.split('.', 1)[-1] if short else k}={v}" for k, v in r["setting"].items()
            ),
            f"recall@{result['k']}": r["recall"],
            "p50_ms": r["p50_ms"],
            "p95_ms": r["p95_ms"],
            "p99_ms": r["p99_ms"],
            "qps": r["qps"],
            "rows": r["rows"],
            "index_mb": None if r["index_bytes"] is None else r["index_bytes"] / MB,
            "build_s": None if r["build_ms"] is None else r["build_ms"] / 1000,
            "mwm" if short else "maintenance_work_mem": r["maintenance_work_mem"],
            "in_sb" if short else "fits_shared_buffers": r["fits_shared_buffers"],
            "reached": r["reached"],
            "over_budget": ", ".join(r["over_budget"]),
        }
        if not short:
            row["sweep"] = r["sweep"]
        out.append(row)
    return out


def render(result: dict) -> str:
    from .plot import png

    title = f"pgeval advise: target {result['target']}"
    goal = f"recall@{result['k']} ≥ {result['target_recall']:g} at the application's LIMIT"
    budgets = ", ".join(f"{k} {v:g}" for k, v in result["budgets"].items()) or "none"
    facts = [
        ("target", result["target"]),
        ("goal", goal),
        ("budgets", budgets),
        ("queries", (result.get("queries") or {}).get("source") or result.get("testset") or ""),
        ("measured under", ", ".join(f"{k}={v}" for k, v in result["measured_under"].items())),
    ]
    parts = [
        f"<h1>{escape(title)}</h1>",
        '<dl class="facts">'
        + "".join(f"<dt>{escape(k)}</dt><dd>{escape(str(v))}</dd>" for k, v in facts)
        + "</dl>",
    ]
    rec = result.get("recommendation")
    if rec:
        statements = "\n".join([rec["ddl"] + ";", *(s + ";" for s in rec["settings_sql"])])
        parts.append(
            f'<h2>Recommendation: {escape(rec["design"])}</h2><p id="why">{escape(rec["why"])}</p>'
            f'<p class="muted">Apply on your table, the index first:</p><pre id="apply">'
            f'{escape(statements)}</pre><p class="muted">The application\'s statement:</p>'
            f"<pre>{escape(rec['query_sql'])}</pre>"
            f'<p class="muted">Evidence: <code>pgeval stage-report {escape(rec["sweep"])}</code> '
            f"(point {escape(rec['point'])}).</p>"
        )
    else:
        parts.append(
            f'<h2>No recommendation</h2><p class="warn" id="why">{escape(result["unmet"]["why"])}</p>'
        )
    parts.append("<h2>Designs</h2>" + html.table(rows(result)))
    for design, why in (result.get("skipped") or {}).items():
        parts.append(f'<p class="muted">not measured: {escape(design)}: {escape(why)}</p>')
    for w in result.get("warnings") or []:
        parts.append(f'<p class="warn">{escape(w)}</p>')
    if plots.available():
        data = base64.b64encode(png(result)).decode("ascii")
        parts.append(
            '<h2>Recall against p95, per design</h2><img class="plot" id="plot-advise" '
            f'alt="recall against p95 per design" src="data:image/png;base64,{data}">'
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{html.CSS}</style></head>"
        f"<body>{''.join(parts)}<script>{html.JS}</script></body></html>\n"
    )


def write(path: str | Path, result: dict) -> Path:
    out = Path(path)
    out.write_text(render(result), encoding="utf-8")
    return out
