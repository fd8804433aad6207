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
    answer = common.conclusion(report)
    if answer:
        parts.append(f"**{answer}**\n")
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
    shown = flagged[: common.FLAGGED_SHOWN]
    more = len(flagged) - len(shown)
    valid = (report.get("counts") or {}).get("valid")
    parts.append(
        f"## Flagged queries: {len(flagged)}{f' of {valid} valid' if valid else ''}\n\n"
        "Low recall (Recall@K < 0.3) or poor ranking (nDCG@10 < 0.5), one row per query, "
        "worst first: the lowest recall, then the most relevant chunks missed.\n\n"
        + table(
            [{**r, "relevant missed": r["missed"]} for r in shown],
            ["query_id", "recall", "relevant missed", "flag", "plan_summary"],
        )
        + (
            f"\n{more} more flagged queries (the per-query table has every query).\n"
            if more
            else ""
        )
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
