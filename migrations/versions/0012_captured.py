"""the application's own queries, captured from the server log

Revision ID: 0012_captured
Revises: 0011_ground_truth_versions
Create Date: 2026-12-07

``pgeval queries capture`` (evaluator/captured/): a named set of searches read from PostgreSQL's
log for one target. ``captured_shape``: each statement the application sent, reduced to its shape
(parameters in place of literals, ``$1`` the query vector), with its LIMIT and distance operator.
``captured_query``: each distinct search (shape, vector and other values), how often it was sent
and when first and last; ``params`` are the values of ``$2``, ``$3`` ... as sent (filter values).
"""

from alembic import op

revision = "0012_captured"
down_revision = "0011_ground_truth_versions"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE pgeval.captured_set (
    set_id     bigserial PRIMARY KEY,
    name       text NOT NULL UNIQUE,
    target     text NOT NULL,
    dimension  integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    captures   jsonb NOT NULL DEFAULT '[]'   -- one record per capture: files, counts, skipped
);
CREATE TABLE pgeval.captured_shape (
    set_id    bigint NOT NULL REFERENCES pgeval.captured_set ON DELETE CASCADE,
    shape     integer NOT NULL,
    statement text NOT NULL,
    operator  text NOT NULL,
    k         integer,                       -- the LIMIT (NULL: not fixed by the statement)
    params    integer NOT NULL,              -- parameters besides the vector ($2 ... $n)
    filters   jsonb NOT NULL DEFAULT '{}',   -- column -> the parameter it is compared to
    PRIMARY KEY (set_id, shape),
    UNIQUE (set_id, statement)
);
CREATE TABLE pgeval.captured_query (
    set_id     bigint NOT NULL,
    query_id   text COLLATE "C" NOT NULL,
    shape      integer NOT NULL,
    vector     real[] NOT NULL,
    params     text[] NOT NULL,
    sent       integer NOT NULL,             -- executions logged
    first_seen timestamptz,
    last_seen  timestamptz,
    PRIMARY KEY (set_id, query_id),
    FOREIGN KEY (set_id, shape) REFERENCES pgeval.captured_shape ON DELETE CASCADE
);
"""

DOWNGRADE = """
DROP TABLE pgeval.captured_query;
DROP TABLE pgeval.captured_shape;
DROP TABLE pgeval.captured_set;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
