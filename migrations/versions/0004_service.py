"""query failures: the queries a service stage asked and got no answer for

Revision ID: 0004_service
Revises: 0003_order
Create Date: 2026-12-10

A service stage (issue 13) calls a live retrieval API once per query. A request that gets no
usable answer — a timeout, an HTTP error after the retries, a body that is not JSON or lacks the
list — is never turned silently into an empty list: it gets one ``pgeval.query_failure`` row
(the last HTTP status, None when no answer came; the message, secrets masked; the attempts made),
written in the same transaction as the query's (empty) results and its ``pgeval.run_progress``
row. Metrics count such a query as one that returned nothing (what a user of the service got);
`pgeval stage-report` counts and names the failures per stage.
"""

from alembic import op

revision = "0004_service"
down_revision = "0003_order"
branch_labels = None
depends_on = None

UPGRADE = r"""
CREATE TABLE pgeval.query_failure (
    run_id    bigint NOT NULL REFERENCES pgeval.run ON DELETE CASCADE,
    query_id  text COLLATE "C" NOT NULL,
    status    integer,
    message   text NOT NULL,
    attempts  integer NOT NULL DEFAULT 1,
    PRIMARY KEY (run_id, query_id)
);
"""

DOWNGRADE = r"""
DROP TABLE IF EXISTS pgeval.query_failure;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
