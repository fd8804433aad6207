"""A sweep's result in words: the recommendation, each --find, the server, the plot's title (the
table and JSON of `pgeval sweep` say them alike)."""

from __future__ import annotations

from typing import Any

from ...measure.operating_points import reaches


def recommendation_line(res: Any) -> str:
    k, goal = res.k, res.target_recall
    rec = res.recommendation
    sampled = bool(res.sampled)
    if rec:
        if sampled:  # sampled rows, nodes of the index: no figure of the application's queries
            from ...testset.query_source import bounded

            return (
                f"recommended: {rec['label']} — {bounded(rec['index_recall'], k)}, against "
                f"exact search at p95 {rec['p95_ms']:.3f} ms (the cheapest point at which the "
                f"sampled rows read {goal:g}; the application's queries may read less)"
            )
        return (
            f"recommended: {rec['label']} — recall@{k} {rec['index_recall']:.4f} against "
            f"exact search at p95 {rec['p95_ms']:.3f} ms ({rec.get('why') or 'the cheapest point reaching ' + format(goal, 'g')})"
        )
    best = res.operating_points.best()
    if best is None:
        return "no point was measured"
    return (
        f"no point reaches recall@{k} >= {goal:g}: the best is {best.label} "
        f"({best.recall:.4f}); widen the grid"
    )


def server_label(server: dict) -> str:
    """Which server answered, in a few words: ``server /run/pg:5432 (standby)``."""
    where = f"{server.get('host') or 'local'}:{server.get('port') or ''}".rstrip(":")
    return f"server {where}" + (" (standby)" if server.get("in_recovery") else "")


def find_line(found: dict, k: int, goal: float, sampled: bool = False) -> str:
    """One line per --find: the value found, or that the target is out of reach; ``sampled``:
    the queries are rows of the index they search (the figure an upper bound)."""
    under = ", ".join(f"{n.split('.')[-1]}={v}" for n, v in (found.get("others") or {}).items())
    where = f" ({under})" if under else ""
    tried = len(found.get("path") or [])
    if found["reached"] and sampled:
        from ...testset.query_source import bounded

        return (
            f"found{where}: {found['setting']}={found['value']} is the smallest value at which "
            f"the sampled rows read recall@{k} {goal:g}: {bounded(found['recall'], k)}; "
            f"{tried} values tried" + interval_text(found.get("interval"))
        )
    if found["reached"]:
        return (
            f"found{where}: {found['setting']}={found['value']} is the smallest value reaching "
            f"recall@{k} {goal:g} ({found['recall']:.4f}; {tried} values tried)"
            + interval_text(found.get("interval"))
        )
    best = found.get("best") or [None, None]
    return (
        f"not found{where}: no {found['setting']} up to --find-max reaches recall@{k} {goal:g}; "
        f"the best tried is {found['setting']}={best[0]} ({(best[1] or 0):.4f}): raise "
        "--find-max, or look at the index's build (m, ef_construction) with --build"
    )


def held_out_line(held: dict | None, k: int) -> str | None:
    """The sampled rows' bias measured held out (:mod:`.held_out`) in one sentence (None: nothing to say)."""
    if not held:
        return None
    if "skipped" in held:
        return f"note: {held['skipped']}"
    name = held["setting"].split(".")[-1]
    low, high = held["range"]
    return (
        "sampled rows measured held out: "
        + (
            f"at the table's size ({held['rows']:,} rows), at {name}={held['value']} they read "
            f"recall@{k} {held['in_graph']:.4f} on the table, as nodes of its index, and "
            f"{held['held_out']:.4f} on a copy of the other rows with the index rebuilt"
            if held.get("every_row")
            else f"on a {held['rows']:,}-row copy (the bias grows with the rows) at {name}="
            f"{held['value']} they read recall@{k} {held['in_graph']:.4f} as nodes of the index "
            f"and {held['held_out']:.4f} held out"
        )
        + f" ({held['bias']:+.4f}); the application's queries "
        f"may read {low:.4f}–{high:.4f} on the table (measured {held['table']:.4f}, an "
        "estimate: the application's own queries measure it, `pgeval queries capture --how`)"
        + (
            f"; below the target {held['target_recall']:g} at its low end"
            if not reaches(low, held.get("target_recall", 0))
            else ""
        )
    )


def interval_text(interval: dict | None) -> str:
    """The found value's interval in words: ``; 95 % interval 18-33 over 500 resamples of the
    queries`` (``above 33``: some resamples reach at no value measured)."""
    if not interval or interval.get("low") is None:
        return ""
    high = interval.get("high")
    upper = f"{high}" if high is not None else "above every value measured"
    return (
        f"; 95 % interval {interval['low']}–{upper} over {interval['resamples']} resamples of "
        "the queries"
    )


def plot_title(res: Any, stage: str, target_name: str) -> str:
    """The plot's title in words: the stage, the target, the queries, the server (no hashes;
    a local socket's directory left out)."""
    from ...testset.query_source import in_words

    queries = in_words(res.queries, res.testset)
    server = res.server or {}
    local = str(server.get("host") or "").startswith("/")  # a socket directory: this machine
    where = "local server" if local and not server.get("in_recovery") else server_label(server)
    return f"{stage} on target {target_name} · {queries} · {where}"


def consistency_line(consistency: dict | None) -> str | None:
    """The text output's line: how every recall was measured against the same rows."""
    if not consistency:
        return None
    snap = consistency.get("snapshot") or {}
    if consistency["how"] == "one snapshot":
        return (
            f"consistency: one snapshot (taken {snap.get('taken_at')}, held "
            f"{snap.get('held_s', 0):.1f} s of --snapshot-max-age "
            f"{consistency['max_age_s']:g} s): the exact answer and every timed statement "
            "read the same rows; VACUUM's xmin horizon was held meanwhile"
        )
    again = consistency.get("remeasured") or []
    named = ", ".join(f"{r['label']} (repetition {r['repetition']})" for r in again) or "none"
    return (
        f"consistency: re-measured points: {named} — each point between two reads of the "
        f"table's row versions, measured again when they moved ({consistency.get('reason')})"
    )


def grouped_consistency_line(by_group: dict[str, dict | None], column: str) -> str | None:
    """A grouped sweep's line: each group's sweep read one snapshot of its own, or which
    groups' points were measured again."""
    known = {g: c for g, c in by_group.items() if c}
    if not known:
        return None
    if all(c["how"] == "one snapshot" for c in known.values()):
        return "consistency: one snapshot per group (exact answer and timed statements)"
    parts = []
    for g, c in known.items():
        if c["how"] != "one snapshot":
            again = ", ".join(r["label"] for r in c.get("remeasured") or []) or "none"
            parts.append(f"{column}={g}: {again}")
    return "consistency: re-measured points: " + "; ".join(parts)
