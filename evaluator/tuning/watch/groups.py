"""A watch of every group (`pgeval watch --group-by tenant`): one probe per group, each its own
series, and the watch recorded whole or not at all.

Every group is measured, whatever another did: a group whose probe fails with one of pgeval's
errors (a user, plan or database error: :class:`~evaluator.core.errors.PgevalError`, or a
database error no library call wrapped: a psycopg error) is noted with its message and the next
group is probed. If any group failed, the probes this watch has
recorded (their rows of pgeval.probe, advice included) are deleted again, and
:class:`~evaluator.core.errors.GroupsFailed` is raised with the probes measured and the groups
that failed: a watch records all its probes or none, so that no series of the watch moves on
while another misses its probe. Anything else (Ctrl-C, a programming error) deletes them too
and is raised as it is, at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ...core.errors import DatabaseError, GroupFailure, GroupsFailed, PgevalError, first_line, param
from .probe import ProbeResult, check, run_probe

if TYPE_CHECKING:
    import psycopg

    from ...core.db import Database
    from .config import WatchConfig


def run_probes(
    database: Database, cfg: WatchConfig, *, on_warning: Callable[..., Any] | None = None
) -> list[ProbeResult]:
    """One probe, or one per group of ``--group-by`` (else the target's own group column): the
    groups as `sweep --group-by` chooses them (all up to ``max_groups``, else the largest and
    the smallest), rows of each group as queries (``--sample-queries N`` spread over the groups,
    or ``--group-queries M`` each; at most its chunks), each group searched as the application
    scopes it (``WHERE column = value``), each its own series; ungrouped on a captured set, one
    per shape (:func:`shape_probes`).
    Every group is probed; if one failed, none is recorded
    (:class:`~evaluator.core.errors.GroupsFailed`: the probes measured, the groups failed)."""
    from ...targets import groups
    from .connections import Lending

    if not isinstance(database, Lending):
        with Lending.of(database) as lending:
            return run_probes(lending, cfg, on_warning=on_warning)
    column = groups.column_for(database, cfg.target, cfg.group_by)
    if column is None and cfg.queries is not None and cfg.queries.kind == "captured":
        shapes = shape_probes(database, cfg)
        done = _all_or_none(database, [(key, one) for key, one, _ in shapes], on_warning)
        for res, (_, _, share) in zip(done, shapes, strict=True):
            res.share = share
        return done
    if column is None:
        groups.ungrouped(cfg.group_queries)
        return [run_probe(database, cfg, on_warning=on_warning)]
    check(cfg)
    chosen = groups.plan(
        database, cfg.target, column, cfg.max_groups, cfg.queries, "probe", cfg.group_queries
    )
    each = [
        ({column: g.value}, replace(cfg, group=(column, g.value),
                                    queries=chosen.queries_of(cfg.queries, g)))
        for g in chosen.measured
    ]  # fmt: skip
    return _all_or_none(database, each, on_warning)


def shape_probes(database: Database, cfg: WatchConfig) -> list[tuple[dict, WatchConfig, float]]:
    """A captured set's probes: one per shape that has queries (within ``--window``), each
    searched as the application sent it (tuning/sweep/shapes.py), at its LIMIT, with the shape's
    share of the searches sent."""
    from ...targets.shapes import shapes_of
    from ...testset.query_source import from_captured

    assert cfg.queries is not None
    out = []
    with database.connect() as conn:
        for sh in shapes_of(conn, str(cfg.queries.captured)):
            src = replace(cfg.queries, shape=sh.shape)
            if from_captured(conn, src):
                one = replace(cfg, shape=sh.shape, queries=src, k=sh.k or cfg.k)
                out.append(({"shape": str(sh.shape)}, one, sh.share))
        conn.rollback()
    return out


def _all_or_none(
    database: Database,
    each: list[tuple[dict, WatchConfig]],
    on_warning: Callable[..., Any] | None,
) -> list[ProbeResult]:
    """Every probe of ``each`` (its key, its configuration) measured; recorded all or none."""
    import psycopg  # (here: `watch --help` loads this package, not the database driver)

    done: list[ProbeResult] = []
    failures: list[GroupFailure] = []
    try:
        for key, one in each:
            try:
                done.append(run_probe(database, one, on_warning=on_warning))
            except PgevalError as exc:
                failures.append(GroupFailure(key, exc))
            except psycopg.Error as exc:  # a database error that no library call wrapped
                failures.append(GroupFailure(key, database_error(exc)))
    except BaseException:
        try:
            _forget(database, done)
        except Exception:  # noqa: BLE001 - (the connection lost, say): the first error is raised
            pass
        raise
    if failures:
        _forget(database, done)
        raise GroupsFailed(done, failures, what="no probe of this watch recorded")
    return done


def weighted(results: list[ProbeResult]) -> dict | None:
    """A captured set's probes (one per shape, each with its ``share``) as one figure: the
    recall weighted by the shapes' shares of the searches sent (over the shapes probed), and
    the worst shape; None when they are not a captured set's shapes, or one has no recall."""
    recalls: dict[str, float] = {}
    shares: dict[str, float] = {}
    for res in results:
        key = (res.probe.get("group_key") or {}).get("shape")
        if key is None or res.share is None or res.probe.get("recall") is None:
            return None
        recalls[str(key)], shares[str(key)] = float(res.probe["recall"]), res.share
    total = sum(shares.values())
    if not recalls or not total:
        return None
    worst = min(recalls, key=lambda k: (recalls[k], k))
    return {
        "weighted_recall": sum(shares[k] * recalls[k] for k in recalls) / total,
        "worst_shape": int(worst),
        "worst_recall": recalls[worst],
    }


def database_error(exc: psycopg.Error) -> DatabaseError:
    """A database error of one group's probe, as pgeval says it (the command line's words for
    an error no library call wrapped; a statement timeout names the option)."""
    import psycopg

    first = first_line(exc)
    if isinstance(exc, psycopg.errors.QueryCanceled) and "statement timeout" in first:
        return DatabaseError(
            f"a statement ran past the statement timeout ({first}): "
            f"{param('statement_timeout')} LONGER"
        )
    if isinstance(exc, psycopg.OperationalError):
        return DatabaseError(f"lost the database connection ({first})")
    return DatabaseError(f"database error: {first}")


def _forget(database: Database, done: list[ProbeResult]) -> None:
    """The rows of pgeval.probe this watch recorded, deleted again (one transaction)."""
    from . import record

    ids = [r.probe["probe_id"] for r in done if r.probe.get("probe_id") is not None]
    if not ids:
        return
    with database.connect() as results:
        record.delete(results, ids)
