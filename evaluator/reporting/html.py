"""The report as one self-contained HTML page: inline CSS, PNG plots embedded as base64 data URIs,
a few lines of inline JavaScript to sort tables. Nothing is fetched from the network."""

from __future__ import annotations

import base64
from html import escape

from . import common, plots
from .common import fmt

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans CJK SC",sans-serif;
margin:24px auto;max-width:1150px;color:#1f2328;padding:0 16px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa;cursor:pointer;user-select:none}td.num{text-align:right;font-variant-numeric:tabular-nums}
.level{font-weight:600;border-radius:4px;padding:1px 6px;color:#fff}
.level-excellent{background:#1a7f37}.level-good{background:#4ac26b}.level-pass{background:#d4a72c}
.level-fail{background:#cf222e}
.warn{background:#fff8c5;border:1px solid #d4a72c;padding:6px 10px;border-radius:6px}
dl.facts{display:grid;grid-template-columns:max-content auto;gap:2px 14px}dl.facts dt{color:#57606a}
dl.facts dd{margin:0}img.plot{max-width:100%;border:1px solid #d0d7de;margin:6px 0}
pre{background:#f6f8fa;padding:8px;overflow:auto;font-size:12px;white-space:pre-wrap}
.muted{color:#57606a}div.wide{overflow-x:auto}div.plot{border:1px solid #d0d7de;margin:6px 0}
div.plot svg{display:block}
#conclusion{font-size:17px;font-weight:600;background:#ddf4ff;border-left:4px solid #0969da;
padding:8px 12px;margin:10px 0 16px}
"""

JS = """
(function () {
  function value(cell) {
    var t = cell.getAttribute("data-v") || cell.textContent.trim();
    var n = parseFloat(t);
    return isNaN(n) || !/^[-+]?[0-9.]/.test(t) ? t.toLowerCase() : n;
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("th").forEach(function (th, col) {
      th.addEventListener("click", function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var dir = th.getAttribute("data-dir") === "asc" ? -1 : 1;
        rows.sort(function (a, b) {
          var x = value(a.cells[col]), y = value(b.cells[col]);
          return (x > y ? 1 : x < y ? -1 : 0) * dir;
        });
        rows.forEach(function (r) { body.appendChild(r); });
        th.setAttribute("data-dir", dir === 1 ? "asc" : "desc");
      });
    });
  });
  document.body.setAttribute("data-ready", "1");
})();
"""

UNSORTED = ("latency", "answers")  # one-row tables: nothing to sort
PLOT_TITLES = {
    "waterfall": "Stage waterfall of recall lost",
    "sweep": "Recall vs latency",
    "by_type": "Per query type",
    "distribution": "Per-query distribution",
    "latency": "Latency",
}


def _td(value: object) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f'<td class="num" data-v="{value}">{escape(fmt(value))}</td>'
    return f"<td>{escape(fmt(value))}</td>"


def _level(level: str | None) -> str:
    if not level:
        return "<td></td>"
    return f'<td><span class="level level-{escape(level)}">{escape(level)}</span></td>'


def table(
    rows: list[dict],
    columns: list[str] | None = None,
    *,
    levels: str | None = None,
    sortable: bool = True,
) -> str:
    if not rows:
        return '<p class="muted">none</p>'
    columns = columns or list(rows[0])
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>"
        + "".join(_level(r.get(c)) if c == levels else _td(r.get(c)) for c in columns)
        + "</tr>"
        for r in rows
    )
    cls = ' class="sortable"' if sortable else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _img(name: str, png: bytes) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (
        f'<h2>{escape(PLOT_TITLES.get(name, name))}</h2><img class="plot" id="plot-{name}" '
        f'alt="{escape(PLOT_TITLES.get(name, name))}" src="data:image/png;base64,{data}">'
    )


def _svg(name: str, svg: str) -> str:
    """A plot as an inline SVG: hover a point for its figures."""
    return (
        f'<h2>{escape(PLOT_TITLES.get(name, name))}</h2><p class="muted">Hover a point for its '
        f'setting and figures.</p><div class="plot" id="plot-{name}">{svg}</div>'
    )


def _plan_cell(row: dict) -> str:
    if row.get("plan") is None:
        return f"<td>{escape(row['plan_summary'])}</td>"
    return (
        f"<td><details><summary>{escape(row['plan_summary'])}</summary><pre>"
        f"{escape(common.plan_text(row['plan']))}</pre></details></td>"
    )


def _flagged_table(rows: list[dict], recall: str) -> str:
    names = ("query_id", recall, "relevant missed", "flags", "plan of the stage")
    head = "".join(f"<th>{escape(c)}</th>" for c in names)
    body = "".join(
        f"<tr><td>{escape(r['query_id'])}</td>{_td(r['recall'])}{_td(r['missed'])}"
        f"<td>{escape(r['flag'])}</td>{_plan_cell(r)}</tr>"
        for r in rows
    )
    return f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def flagged_section(rows: list[dict], report: dict | None = None) -> str:
    """The worst flagged queries, ranked by their recall and then the relevant chunks they
    missed, with the plan of the stage that served them (open a plan to read it); the rest
    folded behind a <details> that says how many."""
    report = report or {}
    shown, rest = rows[: common.FLAGGED_SHOWN], rows[common.FLAGGED_SHOWN :]
    valid = (report.get("counts") or {}).get("valid")
    recall = common.largest_recall(report) or "recall"
    out = (
        f"<h2>Flagged queries: {len(rows)}"
        + (f" of {valid} valid" if valid else "")
        + '</h2><p class="muted">Low recall (Recall@K &lt; 0.3) or poor ranking (nDCG@10 &lt; '
        f"0.5), one row per query, worst first: the lowest {escape(recall)}, then the most "
        "relevant chunks missed"
        + (f"; the {len(shown)} worst shown, {len(rest)} more below them" if rest else "")
        + '; open a plan to read it.</p><div id="flagged">'
    )
    if not rows:
        return out + '<p class="muted">none</p></div>'
    out += _flagged_table(shown, recall)
    if rest:
        out += (
            f"<details><summary>{len(rest)} more flagged queries</summary>"
            f"{_flagged_table(rest, recall)}</details>"
        )
    return out + "</div>"


def render(report: dict, *, with_plots: bool = True, levels: bool = False) -> str:
    images = plots.render_all(report) if with_plots and plots.available() else {}
    notes = []
    if with_plots and not plots.available():
        notes.append(
            "plots left out: matplotlib is not installed (pip install matplotlib, or "
            "pip install -e '.[plot]' in the clone)"
        )
    answer = common.conclusion(report)
    parts = [
        f"<h1>{escape(common.title(report))}</h1>",
        f'<p id="conclusion">{escape(answer)}</p>' if answer else "",
        '<dl class="facts">'
        + "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in common.facts(report))
        + "</dl>",
    ]
    for w in [*(report.get("warnings") or []), *notes]:
        parts.append(f'<p class="warn">{escape(w)}</p>')
    parts.append("<h2>Queries</h2>" + table([common.counts_row(report)], sortable=False))
    parts.append(
        f'<h2>Summary</h2><p class="muted">{escape(common.summary_note(levels))}</p>'
        + '<div id="summary">'
        + table(common.summary_rows(report, levels), levels="level" if levels else None)
        + "</div>"
    )
    plots_html = [
        _svg("sweep", plots.sweep_svg(report) or "") if name == "sweep" else _img(name, png)
        for name, png in images.items()
    ]
    for sec in common.sections(report):
        if sec.key == "by_type":  # the plots go between the sweep and the type table
            parts.extend(plots_html)
            plots_html = []
        parts.append(
            f"<h2>{escape(sec.title)}</h2>"
            + table(sec.rows, sec.columns, sortable=sec.key not in UNSORTED)
        )
    parts.extend(plots_html)
    parts.append(flagged_section(common.flagged_rows(report), report))
    cases = common.case_rows(report)
    parts.append(
        f'<h2>Per query ({len(cases)})</h2><p class="muted">Click a column to sort; '
        'ranked ids show the grade in brackets.</p><div id="cases">' + table(cases) + "</div>"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(common.title(report))}</title><style>{CSS}</style></head>"
        f"<body>{''.join(parts)}<script>{JS}</script></body></html>\n"
    )
