"""`pgeval watch`: one probe of a target's ANN stage at its production setting, for cron."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ...api import vocabulary
from ...api.vocabulary import WATCH_DEFAULTS, openmetrics_text, probe_time
from ...core.errors import GroupsFailed
from ...core.masking import mask as redact
from ..flags import (
    GROUPING,
    INDEX,
    MAX_P95_MS,
    QUERY_SOURCE,
    SET,
    STAGE,
    STATEMENT_TIMEOUT,
    TARGET,
    K,
    formats,
)
from ..option_groups import GroupedCommand, group, opt
from ..options import option_for
from ..output import echo_line, fixed, to_json, warn
from .common import pass_api

if TYPE_CHECKING:
    from ...api import Pgeval
    from ...api.results import ProbeResult


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} ms"


def _table(res: ProbeResult) -> None:
    p = res.probe
    q = res.queries or {}
    queries = vocabulary.queries_in_words(q, res.testset)
    group = "".join(f" · {c}={v}" for c, v in (p.get("group_key") or {}).items())
    echo_line(
        f"probe {p['probe_id']} · target {p['target']}{group} · {p['stage']} · "
        f"{res.setting}={res.value} · {queries} · {probe_time(p['probed_at'])}"
    )
    recall = f"recall@{p['k']} {fixed(p['recall'], '.3f')}"
    if q.get("source") == "sample" and p["recall"] is not None:  # nodes of the index probed
        recall = vocabulary.bounded(p["recall"], p["k"])
    rows = fixed(p["rows_mean"], "g")
    echo_line(
        f"{recall} against exact search · p50 {_ms(p['p50_ms'])} · "
        f"p95 {_ms(p['p95_ms'])} · rows returned {rows} · table {p['table_rows'] or 0:,} rows · "
        f"data version {str(p['data_version'] or '')[:12]}"
    )
    options = ", ".join(
        f"{k}={v}" for k, v in ((p["index_build"] or {}).get("options") or {}).items()
    )
    plan = res.plan or {}
    if plan and not plan.get("ann"):  # the planner served the group without the ANN index
        echo_line(f"{plan['mode']} plan: {plan.get('served_by')} (the planner's own plan)")
    else:
        echo_line(
            f"index {p['index_build_label']}"
            + (f" {options}" if options else "")
            + (f" · {plan['mode']} plan (the planner's own)" if plan else "")
        )
    gt = res.ground_truth or {}
    if gt.get("status") == "computed":
        why = f" ({gt.get('reason') or 'nothing stored for these queries on this data'})"
        echo_line(f"exact ground truth: full, computed in {gt['compute_ms'] / 1000:.2f} s{why}")
    elif gt.get("status") == "incremental":
        echo_line(
            f"exact ground truth: incremental ({gt['changed_rows']:,} rows changed), refreshed "
            f"in {gt['compute_ms'] / 1000:.2f} s ({gt['queries_recomputed']} queries in full)"
        )
    elif gt:
        echo_line(f"exact ground truth: reused (computed {gt.get('computed_at')})")
    timed = p.get("timed_ms")
    echo_line(
        f"cost: {res.wall_ms / 1000:.2f} s wall"
        + ("" if timed is None else f", {timed:.1f} ms in the {p['queries']} timed statements")
        + _data_read(res.data_read, p["target"])
        + (
            "; configuration epoch unchanged: fingerprints and plan kept"
            if res.path == "steady"
            else ""
        )
    )
    if res.changes:
        echo_line(f"changes: {res.changes}")
    if q.get("source") == "sample":
        echo_line(vocabulary.SAMPLED_BIAS)
    for line in res.advice:
        echo_line(f"advice: {line}")
    if not res.crossed:
        given = ", ".join(f"{k} {v:g}" for k, v in (p["bounds"] or {}).items())
        echo_line(f"within bounds ({given})" if given else "no bounds given")


def _data_read(read: dict | None, target: str) -> str:
    """The cost line's words on the data version: read from the change log, or a pass over the
    table (and the command that spares it)."""
    if read is None:
        return ""
    if read["via"] == "change log":
        return f"; data version from the change log ({read['ms']:.0f} ms)"
    return (
        f"; data version: a pass over the table ({read['via']}, {read['ms']:.0f} ms; "
        f"`pgeval target track {target}` reads a change log instead)"
    )


def _json(res: ProbeResult) -> dict[str, Any]:
    p = dict(res.probe)
    return {
        **p,
        "setting": {res.setting: res.value},
        "status": "crossed" if res.crossed else "ok",
        "alerts": res.alerts,
        "changes": res.changes,
        "advice_lines": res.advice,
        "remedy": res.remedy,
        "reindex": res.reindex,
        "last_build": res.rebuild,
        "ground_truth": res.ground_truth,
        "plan": res.plan,
        "queries_source": res.queries,
        # sampled rows are nodes of the index probed: its recall an upper bound for the
        # application's queries
        "queries_label": vocabulary.queries_label(res.queries),
        "cost": {
            "wall_ms": res.wall_ms,
            "timed_ms": p.get("timed_ms"),
            "path": res.path,
            "data_version": res.data_read,
        },
        "warnings": res.warnings,
    }


_WHAT = group(
    "What is probed",
    TARGET.but(help="Target to probe."),
    STAGE.but(help="ANN stage to probe (measured against exact search)."),
    SET.but(
        help="The production setting (SET LOCAL), e.g. hnsw.ef_search=100. "
        "[default: the target's stored settings, else the server's]"
    ),
    INDEX.but(help="The ANN index to probe when the column has several."),
)
_BOUNDS = group(
    "Bounds",
    opt(
        "--min-recall",
        type=float,
        default=None,
        metavar="R",
        help="Bound: recall@K must be at least R.",
    ),
    opt(
        "--max-drop",
        type=float,
        default=None,
        metavar="D",
        help="Bound: recall@K may fall at most D below the first probe of the same index build.",
    ),
    MAX_P95_MS.but(metavar="X", help="Bound: p95 latency at most X ms."),
    opt(
        "--no-remedy",
        is_flag=True,
        help="When a recall bound is crossed, do not measure the setting that restores it.",
    ),
    opt(
        "--remedy-max",
        type=click.IntRange(1, 1_000_000),
        default=None,
        help="Largest value of the work setting the remedy tries.  [default: 1000]",
    ),
)
_MEASURING = group(
    "Measuring",
    K.but(
        default=WATCH_DEFAULTS.k,
        help="Cut-off of recall against exact search (the application's LIMIT).",
    ),
    STATEMENT_TIMEOUT,
)
_GROUPING = GROUPING.but(
    "--group-by",
    help="One probe per group of this column (a tenant), searched as the application scopes "
    "it (WHERE COLUMN = value), --sample-queries N rows spread over the groups "
    "(--group-queries: per group), each its own series. "
    "[default: the target's --group-by, else the whole table]",
)


@click.command(cls=GroupedCommand)
@QUERY_SOURCE
@_WHAT
@_BOUNDS
@_MEASURING
@_GROUPING
@group("Output", *formats(("table", "json", "openmetrics")))
@pass_api
def watch(
    pg: Pgeval,
    queries: dict[str, Any],
    target_name: str,
    stage: str,
    settings: tuple[str, ...],
    k: int,
    no_remedy: bool,
    fmt: str,
    **options: Any,
) -> None:
    """Probe the index at its production setting and record it in pgeval.probe: for cron, CI
    or a Kubernetes CronJob (docs/watch.md).

    \b
    One probe: the stage at its production setting (--set, else the target's stored settings,
    else the server's value of the stage's work setting) on a small, stable set of queries
    (default --sample-queries 100: rows of the target in a fixed hash order, so the sample
    follows the table as rows come and go), measured against the stored exact ground truth
    (reused while the data is unchanged, computed again when it changed; the output says
    which). Recorded: recall@K, p50/p95, rows returned, the table's size and data version, and
    the index's build identity (oid and relfilenode change with a REINDEX); chart them from
    the view pgeval.probe_history.

    \b
    Exit codes: 0 within bounds, 2 a bound was crossed (each named on stderr, with since when
    and what changed since the first probe of the same index build), 1 an error. When a recall
    bound is crossed, the smallest setting that restores it is measured on the same queries,
    and REINDEX INDEX CONCURRENTLY is given for an index whose recall drifted with its data.
    With --group-by every group is probed with the planner's own plan (a tenant served exactly
    through its btree: recall 1.0); a group that fails is named on stderr and no probe of the
    watch is recorded: exit 2 when another group crossed a bound, else 1. With --captured SET
    (no --group-by) every shape of the set is probed as the application sent it (its
    statement, LIMIT and values), each its own series (group_key {"shape": "N"}), and the
    recall weighted by the searches sent is printed with the worst shape.

    \b
    Examples:
      pgeval watch --target kb --stage hnsw --min-recall 0.95
      pgeval watch --target kb --stage hnsw --set hnsw.ef_search=100 --max-drop 0.02 \\
          --max-p95-ms 20 --format openmetrics > /var/lib/node_exporter/pgeval.prom
      pgeval watch --target kb --stage diskann --queries-sql \\
          "SELECT id, embedding FROM query_log ORDER BY at DESC LIMIT 200" --format json
    """
    failed: GroupsFailed | None = None
    try:
        results = pg.watch(
            target_name,
            stage,
            **queries,
            **options,  # the others under their names
            settings=list(settings),
            k=k,
            remedy=not no_remedy,
            on_warning=warn if fmt == "table" else None,
        )
    except GroupsFailed as exc:  # the groups measured are shown, nothing recorded
        failed, results = exc, exc.results
    _show(results, fmt, failed, (target_name, stage, k))
    crossed = _alerts(results)
    if failed is not None:
        _errors(failed)
        click.get_current_context().exit(2 if crossed else 1)
    if crossed:
        click.get_current_context().exit(2)


def _show(results: list[ProbeResult], fmt: str, failed: GroupsFailed | None, where: tuple) -> None:
    """The probes measured, in ``fmt``; with a group failed, nothing of the watch recorded
    (``where``: the target, stage and k, which label a failed group's sample)."""
    failures = [] if failed is None else failed.failures
    shapes = vocabulary.shapes_weighted(results) if failed is None else None
    if fmt == "json":
        docs = [_json(res) for res in results]
        grouped = failed is not None or any(res.probe.get("group_key") for res in results)
        if not grouped:
            click.echo(to_json(docs[0]))
        elif failed is None:
            click.echo(to_json({"probes": docs, **({"shapes": shapes} if shapes else {})}))
        else:
            errors = [{"group_key": f.group, "error": redact(f.text(option_for))} for f in failures]
            click.echo(to_json({"probes": docs, "errors": errors, "recorded": False}))
    elif fmt == "openmetrics":
        labels = [
            {"target": where[0], "stage": where[1], "k": str(where[2]), "group": str(value)}
            for f in failures
            for value in f.group.values()
        ]
        click.echo(openmetrics_text(results, failed=labels), nl=False)
    else:
        for i, res in enumerate(results):
            if i:
                click.echo("")
            _table(res)
        if shapes:
            echo_line(
                f"captured shapes, weighted by the searches sent: recall "
                f"{shapes['weighted_recall']:.4f}; the worst, shape {shapes['worst_shape']}: "
                f"{shapes['worst_recall']:.4f}"
            )
        if failed is not None:
            if results:
                click.echo("")
            echo_line(
                f"{len(failures)} of {len(failures) + len(results)} groups failed "
                f"({', '.join(f.label for f in failures)}): no probe of this watch is recorded"
            )
    if fmt != "table":  # (each warning once, however many groups said it)
        warn(*dict.fromkeys(w for res in results for w in res.warnings))


def _alerts(results: list[ProbeResult]) -> bool:
    """One line on stderr per bound crossed, naming its group; True when any was crossed."""
    crossed = False
    for res in results:
        group = "".join(f"{c}={v}: " for c, v in (res.probe.get("group_key") or {}).items())
        for line in res.alerts:
            crossed = True
            click.echo(
                f"pgeval: watch: {group}{line}" + (f"; {res.changes}" if res.changes else ""),
                err=True,
            )
    return crossed


def _errors(failed: GroupsFailed) -> None:
    """One line on stderr per group that failed, then what that means for the watch."""
    for f in failed.failures:
        click.echo(f"pgeval: error: watch: {redact(f.text(option_for))}", err=True)
    measured = len(failed.results)
    click.echo(
        f"pgeval: error: watch: {len(failed.failures)} of {measured + len(failed.failures)} "
        f"groups failed: no probe of this watch is recorded ({measured} measured, deleted "
        "again); the bounds above are those of the groups measured",
        err=True,
    )
