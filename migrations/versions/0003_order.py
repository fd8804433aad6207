"""ids in byte order: query and chunk id columns use the "C" collation

Revision ID: 0003_order
Revises: 0002
Create Date: 2026-12-06

trec_eval breaks ties in score by document id in strcmp (byte) order, and so must pgeval, whatever
collation the database was created with (most production servers use a language collation such as
en_US.UTF-8, where 'B1' sorts between 'a1' and 'b1'). Every query id and chunk id column of schema
pgeval gets COLLATE "C": sorts, tie-breaks, comparisons and grouping on them are byte order, and
equality is exact even under a non-deterministic default. The data is kept; PostgreSQL rebuilds
the indexes and keys that include these columns. The SQL of sql/*.sql and of the stages also says
COLLATE "C" wherever an id comes from a function result or a user's table.
"""

from alembic import op

revision = "0003_order"
down_revision = "0002"
branch_labels = None
depends_on = None

# table -> its id columns (text, or text[] for the chunk ids an answer cites)
ID_COLUMNS = {
    "query": ("query_id",),
    "qrel": ("query_id", "chunk_id"),
    "query_embedding": ("query_id",),
    "result": ("query_id", "chunk_id"),
    "query_timing": ("query_id",),
    "query_plan": ("query_id",),
    "answer": ("query_id", "cited", "supported"),
    "run_progress": ("query_id",),
}
ARRAYS = {"cited", "supported"}


def _alter(collation: str) -> str:
    statements = []
    for table, columns in ID_COLUMNS.items():
        alters = ", ".join(
            f"ALTER COLUMN {c} TYPE text{'[]' if c in ARRAYS else ''} COLLATE {collation}"
            for c in columns
        )
        statements.append(f"ALTER TABLE pgeval.{table} {alters};")
    return "\n".join(statements)


def upgrade() -> None:
    op.execute(_alter('"C"'))


def downgrade() -> None:
    op.execute(_alter('pg_catalog."default"'))
