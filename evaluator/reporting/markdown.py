"""The report as Markdown (for a pull request comment or a wiki page): the same sections as the
HTML page, without the plots."""

from __future__ import annotations

from . import common
from .common import fmt

LEVEL_MARK = {"excellent": "🟢 excellent", "good": "🟢 good", "pass": "🟡 pass", "fail": "🔴 fail"}


def _cell(value: object) -> str:
    return fmt(value).replace("|", "\\|").replace("\n", " ")


def table(rows: list[dict], columns: list[str] | None = None) -> str:
    if not rows:
        return "_none_\n"
    columns = columns or list(rows[0])
    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    out += ["| " + " | ".join(_cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(out) + "\n"


def render(report: dict, *, levels: bool = False) -> str:
    parts = [f"# {common.title(report)}\n"]
    parts.append("\n".join(f"- **{k}**: {v}" for k, v in common.facts(report)) + "\n")
    if report.get("warnings"):
        parts.append("> **Warnings**\n" + "\n".join(f"> - {w}" for w in report["warnings"]) + "\n")
    parts.append("## Queries\n\n" + table([common.counts_row(report)]))
    rows = [
        {**r, "level": LEVEL_MARK.get(r["level"], r["level"] or "")} if levels else r
        for r in common.summary_rows(report, levels)
    ]
    parts.append(
        f"## Summary\n\n{common.summary_note(levels)}\n\n"
        + table(rows, ["metric", "value", "level", "thresholds"] if levels else ["metric", "value"])
    )
    for sec in common.sections(report):
        parts.append(f"## {sec.title}\n\n" + table(sec.rows, sec.columns))
    flagged = common.flagged_rows(report)
    parts.append(
        f"## Flagged queries ({len(flagged)})\n\nLow recall (Recall@K < 0.3) and poor ranking "
        "(nDCG@10 < 0.5), one row per query, worst first.\n\n"
        + table(flagged, ["query_id", "flag", "worst", "plan_summary"])
    )
    for f in flagged[: common.FLAGGED_SHOWN]:
        if f.get("plan") is not None:
            parts.append(
                f"<details><summary>plan of {f['query_id']}</summary>\n\n```\n"
                f"{common.plan_text(f['plan'])}\n```\n</details>\n"
            )
    cases = common.case_rows(report)
    parts.append(
        f"## Per query ({len(cases)})\n\nRanked ids show the grade in brackets.\n\n" + table(cases)
    )
    return "\n".join(parts)
