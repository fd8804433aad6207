"""`pgeval advise --report FILE.html`: one self-contained page a DBA can sign: the recommendation
(or what binds), the statements to apply, every design's figures and the plot (recall against
p95 per design, marker size = index size, target line, recommended point)."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from ...reporting import html, plots
from ...testset.query_source import SAMPLED_ROWS
from ..sweep.grid import label_of
from . import predict
from .rules import build_text, named

MB = 1048576.0


def rows(result: dict[str, Any], *, short: bool = False) -> list[dict[str, Any]]:
    """One flat row per design x build (the command's table and this page's: ``short`` names
    and one ``verdict`` column; otherwise ``reached``, ``over_budget`` and the sweep). Grouped:
    the worst group (name, rows, recall); screened: where the row was measured."""
    out = []
    for r in result["designs"]:
        row: dict[str, Any] = {
            "design": r["design"],
            "build": build_text(r),
            "setting": ", ".join(
                f"{k.split('.', 1)[-1] if short else k}={v}" for k, v in r["setting"].items()
            ),
            **({"verdict": verdict(r)} if short else {}),  # beside the names: always seen
            f"recall@{result['k']}": r["recall"],
            "±95%": r.get("recall_margin"),
            "p50_ms": r["p50_ms"],
            "p95_ms": r["p95_ms"],
            "p99_ms": r["p99_ms"],
            "qps": r["qps"],
            "rows": _whole(r["rows"]),
            "index_mb": None if r["index_bytes"] is None else r["index_bytes"] / MB,
            "build_s": None if r["build_ms"] is None else r["build_ms"] / 1000,
            "mwm" if short else "maintenance_work_mem": r["maintenance_work_mem"],
            "in_sb" if short else "fits_shared_buffers": r["fits_shared_buffers"],
        }
        worst = r.get("worst_group") or {}
        grouped = {
            "worst_group": worst.get("group"),
            "worst_rows": worst.get("rows"),
            "worst_recall": worst.get("recall"),
        }
        placed = any(d.get("in_place") for d in result["designs"])
        long = {
            "queries": r.get("queries"),
            "reached": r["reached"],
            "over_budget": ", ".join(r["over_budget"]),
            "sweep": r["sweep"],
        }
        row = {
            **row,
            **(grouped if result.get("group_by") else {}),
            **(
                {"measured_on": where_short(r)}
                if result.get("screened_on") is not None or result.get("held_out")
                else {}
            ),
            **({"in_place": (r.get("in_place") or {}).get("name")} if placed else {}),
            **({} if short else long),
        }
        out.append(row)
    return out


def _whole(value: Any) -> Any:
    """A mean of whole rows as an integer when it is one (10, not 10.0000)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def verdict(design: dict[str, Any]) -> str:
    """A design's verdict in words: ``meets``, ``below target``, ``over p95_ms, index_mb``;
    ``upper bound`` where sampled rows, nodes of the index, read the target (never ``meets``:
    the application's queries read less)."""
    words = [] if design["reached"] else ["below target"]
    if design["over_budget"]:
        words.append("over " + ", ".join(design["over_budget"]))
    meets = "upper bound (sampled rows)" if design.get("queries") == SAMPLED_ROWS else "meets"
    return ", ".join(words) or meets


def where_short(row: dict[str, Any]) -> str:
    """Where a row was measured, in a table cell: ``table``, ``sample 20,000``, ``copy 999,700``
    (a scratch copy of every row but the held-out ones)."""
    if row.get("measured_on") == "sample":
        rows = (row.get("screened") or {}).get("rows")
        text = str(row.get("measured_where") or "")
        return "sample " + (text.split(" rows", 1)[0].rsplit(" ", 1)[-1] if text else str(rows))
    text = str(row.get("measured_where") or "table")
    if text == "table":
        return "table"
    return "copy " + text.split(" rows", 1)[0].rsplit(" ", 1)[-1]


def flow_lines(result: dict[str, Any]) -> list[str]:
    """The screening in words: where each figure was measured, the anchor's gap between the
    sample and the table, the designs not built in full and why, what advise did to the table,
    and where the time went (or "stored")."""
    out = []
    screen = result.get("screen") or {}
    if result.get("screened_on") is not None:
        held = screen.get("held_out") or 0
        out.append(
            f"screened on a sample of {result['screened_on']:,} of {screen.get('table_rows'):,} "
            f"rows (target {screen.get('target')}"
            + (f", {held:,} sampled query rows held out" if held else "")
            + "); built in full: "
            + (", ".join(result.get("confirmed") or []) or "none")
        )
    if result.get("anchor"):
        out.append(f"the index your table has: {result['anchor']}, measured in place on the table")
    for r in result["designs"]:
        if r.get("gap"):
            out.append(f"  {r['design']} {build_text(r)}: {r['gap']}")
        upper = r.get("upper_bound")
        if upper and upper.get("recall") is not None:
            out.append(
                f"  {(r.get('in_place') or {}).get('name')}: measured again on the "
                f"{r.get('measured_where')}: in place, its sampled rows (nodes of the index) "
                f"read {upper['recall']:.4f} at {_setting(upper)}, an upper bound"
            )
    dropped = result.get("dropped") or []
    if dropped:
        out.append(
            "not built in full (their sample figures are not the table's; on the table: "
            "measure it after building):"
        )
        predicted = {  # (keyed as Design.label names the dropped ones)
            f"{r['design']} {label_of(r['build'], {})}": r["predicted"]
            for r in result["designs"]
            if r.get("predicted")
        }
        for d in dropped:
            out.append(f"  {d['design']}: {d['why']}")
            if d["design"] in predicted:
                out.append(f"    {predict.text(predicted[d['design']])}")
    full = result.get("full_build")
    if full and full.get("build_s") is not None:
        est = full.get("estimated_build_s")
        out.append(
            f"built in full: {full['design']} on the {full.get('on')} ({full.get('rows'):,} rows) "
            f"in {full['build_s']:.0f} s"
            + ("" if est is None else f" (estimated from the sample's build rate: {est:.0f} s)")
        )
    out.extend(result.get("notes") or [])
    out.append(time_line(result))
    return out


def time_line(result: dict[str, Any]) -> str:
    t = result.get("spent") or {}
    if result.get("stored"):
        return (
            f"stored: nothing built or measured, every figure read back from its stored sweep "
            f"({t.get('total', 0):.1f} s)"
        )
    return (
        f"time: {t.get('total', 0):.0f} s: ground truth {t.get('ground_truth', 0):.0f} s, "
        f"copies {t.get('copies', 0):.0f} s, builds {t.get('builds', 0):.0f} s, measuring "
        f"{t.get('measuring', 0):.0f} s"
    )


def _setting(r: dict[str, Any]) -> str:
    return ", ".join(f"{k.split('.', 1)[-1]}={v}" for k, v in (r.get("setting") or {}).items())


def _facts(result: dict[str, Any]) -> list[tuple[str, Any]]:
    """The page's facts list: target, goal, budgets, queries, what was measured under, time."""
    goal = f"recall@{result['k']} ≥ {result['target_recall']:g} at the application's LIMIT"
    budgets = ", ".join(f"{k} {v:g}" for k, v in result["budgets"].items()) or "none"
    facts = [
        ("target", result["target"]),
        ("goal", goal),
        ("budgets", budgets),
        ("queries", (result.get("queries") or {}).get("source") or result.get("testset") or ""),
    ]
    if result.get("measured_under"):  # settings applied while measuring (--set), if any
        under = ", ".join(f"{k}={v}" for k, v in result["measured_under"].items())
        facts.append(
            (
                "measured under",
                f"{under} (SET LOCAL while measuring; not part of the recommendation)",
            )
        )
    if result.get("group_by"):
        every = f"{result['group_by']}: a design meets the goal only if every group does"
        facts.append(("per group of", every))
    if result.get("screened_on") is not None:
        screen = result.get("screen") or {}
        of = f"{result['screened_on']} of {screen.get('table_rows')} rows"
        facts.append(("screened on", f"{of} (target {screen.get('target')})"))
        facts.append(("built in full", ", ".join(result.get("confirmed") or []) or "none"))
    spent = time_line(result)  # "time: 7 s: ground truth ..." or "stored: ..."
    facts.append(("time", spent.removeprefix("time: ")))
    return facts


def _recommendation(result: dict[str, Any]) -> str:
    """The recommendation's section (the statements to apply, the indexes, the statement
    measured), then the scan modes compared and the groups no setting reaches."""
    said = [result.get("scan_modes_line"), result.get("unreachable_line")]
    return _advice(result) + "".join(
        f'<p id="{key}">{escape(text)}</p>'
        for key, text in zip(("scan-modes", "unreachable"), said, strict=True)
        if text
    )


def _advice(result: dict[str, Any]) -> str:
    rec = result.get("recommendation")
    if rec:
        ddl = (
            []
            if rec.get("keep")
            else [
                *(s + ";" for s in rec.get("build_sql") or []),
                *(c["column_sql"] + ";" for c in [rec.get("statement_change")] if c),
                rec["ddl"] + ";",
            ]
        )
        statements = "\n".join([*ddl, *(s + ";" for s in rec["settings_sql"])])
        how = (
            f"Keep {rec['keep']} (the index your table has); set:"
            if rec.get("keep")
            else "Apply on your table, the index first:"
        )
        return (
            f'<h2>Recommendation: {escape(rec["design"])}</h2><p id="why">{escape(rec["why"])}</p>'
            f'<p class="muted">{escape(how)}</p><pre id="apply">'
            f"{escape(statements)}</pre>{indexes_section(rec)}"
            "<p class=\"muted\">The statement measured (pgeval's: your application's gets "
            "these figures when it orders by the same distance operator with the same "
            "LIMIT):</p>"
            f"<pre>{escape(rec['query_sql'])}</pre>"
            f'<p class="muted">Evidence: <code>pgeval stage-report {escape(rec["sweep"])}</code> '
            f"(point {escape(rec['point'])}).</p>"
        )
    return (
        f'<h2>No recommendation</h2><p class="warn" id="why">{escape(result["unmet"]["why"])}</p>'
    )


def render(result: dict[str, Any]) -> str:
    from .plot import svg

    title = f"pgeval advise: target {result['target']}"
    facts = _facts(result)
    parts = [
        f"<h1>{escape(title)}</h1>",
        '<dl class="facts">'
        + "".join(f"<dt>{escape(k)}</dt><dd>{escape(str(v))}</dd>" for k, v in facts)
        + "</dl>",
    ]
    parts.append(_recommendation(result))
    table = rows(result, short=True)
    parts.append(
        '<h2>Designs</h2><div class="wide">'
        + html.table(table)
        + "</div>"
        + '<p class="muted">mwm: the maintenance_work_mem of the build; in_sb: the index fits '
        "shared_buffers.</p><h3>Evidence</h3>" + html.table(evidence(result))
    )
    if result.get("group_by"):
        parts.append(groups_section(result))
    if result.get("screened_on") is not None:  # where each figure was measured, what was dropped
        parts.append(
            '<h2>Screening</h2><pre id="screening">'
            + escape("\n".join(flow_lines(result)))
            + "</pre>"
        )
    for design, why in (result.get("skipped") or {}).items():
        parts.append(f'<p class="muted">not measured: {escape(design)}: {escape(why)}</p>')
    for w in result.get("warnings") or []:
        parts.append(f'<p class="warn">{escape(w)}</p>')
    if plots.available():  # an inline SVG: hover a point for its figures
        parts.append(
            '<h2>Recall against p95, per design</h2><p class="muted">Hover a point for its '
            'setting, recall with its interval, p95 and index size.</p><div class="plot" '
            f'id="plot-advise">{svg(result)}</div>'
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{html.CSS}</style></head>"
        f"<body>{''.join(parts)}<script>{html.JS}</script></body></html>\n"
    )


def indexes_section(rec: dict[str, Any]) -> str:
    """The indexes the table has (what the planner may keep choosing), the rollback, and when to
    drop the old ones."""
    out = ""
    if rec.get("planner") and not (rec.get("keep") and rec.get("in_place")):
        out += f'<p class="warn" id="indexes">{escape(rec["planner"])}</p>'
    if rec.get("rollback"):
        out += '<p class="muted">Rollback:</p><pre id="rollback">' + escape(
            "\n".join(s + ";" for s in rec["rollback"])
        )
        out += "</pre>"
    if rec.get("drop_old"):
        drops = "\n".join(o["drop"] + ";" for o in rec.get("supersedes") or [])
        out += (
            f'<p class="muted">Drop the old index {escape(rec["drop_old"])}:</p>'
            f'<pre id="drop-old">{escape(drops)}</pre>'
        )
    return out


def evidence(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per design x build, the stored sweep(s) its figures are read from."""
    out = []
    for r in result["designs"]:
        sweeps = r.get("sweeps") or {None: r["sweep"]}
        for group, name in sweeps.items():
            row = {
                "design": r["design"],
                "build": build_text(r),
                **({"group": group} if result.get("group_by") else {}),
                "point": r["point"],
                "sweep (pgeval stage-report SWEEP)": name,
            }
            out.append(row)
    return out


def groups_section(result: dict[str, Any]) -> str:
    """Per design, its groups at the design's setting, the groups that miss named first."""
    out = [
        f'<h2 id="groups">The groups that miss</h2><p class="muted">Each design at its setting, '
        f"every group searched as the application searches it (WHERE {escape(result['group_by'])}"
        " = value), worst first.</p>"
    ]
    for r in result["designs"]:
        missing = r.get("groups_missing") or []
        head = named(r)
        verdict = (
            f'<p class="warn">misses in: {escape(", ".join(missing))}</p>'
            if missing
            else '<p class="muted">every group reaches the target</p>'
        )
        out.append(
            f"<h3>{escape(head)}</h3>{verdict}"
            + html.table(
                [
                    {
                        "group": g["group"],
                        "rows": g["rows"],
                        "queries": g["queries"],
                        f"recall@{result['k']}": g["recall"],
                        "p95_ms": g["p95_ms"],
                        "reached": g["reached"],
                    }
                    for g in r.get("groups") or []
                ]
            )
        )
    return "".join(out)


def write(path: str | Path, result: dict[str, Any]) -> Path:
    out = Path(path)
    out.write_text(render(result), encoding="utf-8")
    return out
