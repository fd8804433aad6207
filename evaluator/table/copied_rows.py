"""Scratch copies (tuning/build_sweep.py, advise's samples): what names one (its schema's prefix),
and the rows one holds: a scoped target (one group of a tenant column) is copied whole, every
group with the group column, so that one copy and one index serve every group's sweep, as the
table's one index serves every tenant."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..targets.targets import SCRATCH_PREFIX  # every scratch schema's (build_sweep's, advise's)

SCRATCH_TABLE = "kb"
# a scratch table's storage: no autovacuum (nothing writes it after it is made; a vacuum of the
# fresh copy mid-measurement sets its visibility map, cheapening a btree's path, and a tenant at
# the planner's switching point would change path between two of its sweeps)
STEADY = " WITH (autovacuum_enabled = off)"


def is_scratch_copy(target: Any) -> bool:
    """Whether ``target`` searches a scratch copy pgeval makes (and makes again on each run)."""
    return str(getattr(target, "schema", None) or "").startswith(SCRATCH_PREFIX)


def group_column(target: Any) -> str | None:
    """The group column a scoped target's copy carries (None: not scoped, or scoped by its id
    or vector column)."""
    scope = target.scope
    if scope is None or scope[0] in (target.id_column, target.vector_column):
        return None
    return str(scope[0])


def copied_rows(target: Any) -> Any:
    """The rows a scratch copy of ``target`` holds: its own, every group of a scoped target (one
    copy and one index for every group, as on the table)."""
    column = group_column(target)
    if column is None:
        return target
    return replace(
        target,
        filters={k: v for k, v in target.filters.items() if k != column},
        null_true=[c for c in target.null_true if c != column],
        scope=None,
    )


def over_copy(source: Any, name: str, schema: str, table: str = SCRATCH_TABLE, **more: Any) -> Any:
    """Target ``name`` over the scratch copy ``schema.table`` of ``source``'s rows: the id and
    vector columns only, no filter (the copy holds the rows they chose); ``more``: other fields."""
    return replace(
        source,
        name=name,
        schema=schema,
        table=table,
        text_column=None,
        filters={},
        null_true=[],
        dimension_column=None,
        **more,
    )


def require_create(kb: Any, why: str) -> None:
    """Before any work: the role may create the scratch schemas ``why`` needs in the knowledge
    base's database (else one line with the grant, not a bare "permission denied" after the
    first design was measured)."""
    row = kb.execute(
        "SELECT has_database_privilege(current_database(), 'CREATE'), current_database(), "
        "current_user"
    ).fetchone()
    kb.rollback()
    if not row[0]:
        from ..core.errors import DatabaseError

        raise DatabaseError(
            f"{why} builds on a scratch copy of the table in a schema of its own "
            f"({SCRATCH_PREFIX}…, dropped at the end) in the knowledge base's database "
            f"{row[1]}, and role {row[2]} may not create schemas there: a superuser or the "
            f'database\'s owner runs GRANT CREATE ON DATABASE "{row[1]}" TO "{row[2]}" '
            '(docs/least-privilege.md, "Scratch copies")'
        )
