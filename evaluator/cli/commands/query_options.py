"""The words for the queries of `pgeval sweep` and `pgeval run pipeline` without judgements
(``--sample-queries``, ``--queries-sql``, ``--queries-file``: ``flags.QUERY_SOURCE``)."""

from __future__ import annotations

from ...api import vocabulary


def no_judgements_line(info: dict | None, k: int) -> str:
    what = vocabulary.queries_in_words(info, detail=True)
    line = (
        f"queries: {what}; no graded judgements, so the measures are recall@{k} against "
        "exact search, latency and rows returned"
    )
    if info and info.get("source") == "sample":
        line += f"\n{vocabulary.SAMPLED_BIAS}"
    limits = (info or {}).get("limits") or []
    if limits and k not in limits:
        asked = ", ".join(f"LIMIT {n}" for n in limits)
        line += (
            f"\nnote: the application's searches ask {asked}; measured at recall@{k}: "
            f"give --k {limits[0]} to measure at the application's LIMIT"
        )
    return line


def group_queries_words(said: dict | None, before: str = "") -> str:
    """``30 sampled queries per group (--sample-queries 300 over 10 groups; ...)`` of a grouped
    measurement's ``group_queries`` (after ``before``); "" when none (captured queries)."""
    if not said:
        return ""
    how = (
        "--group-queries"
        if said["given"]
        else f"--sample-queries {said['sample_queries']:,} over {said['groups']} groups"
    )
    return (
        f"{before}{said['per_group']:,} sampled queries per group ({how}; a group's chunks at most)"
    )
