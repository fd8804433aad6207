"""content checksums cached by table version

Revision ID: 0006_checksum
Revises: 0005_storage
Create Date: 2026-12-11

``pgeval.data_checksum``: the content checksum of a target's rows (evaluator/table/fingerprint.py,
``capture_data``) keyed by a hash of the table's identity, the checksummed columns, the filters and
the table's *version value* (count and sum of hashtextextended(tableoid:ctid:xmin) under the
filters; see evaluator/table/data_checksum.py). A later fingerprint of an unchanged table reads the
cheap version value and reuses the checksum instead of hashing every vector again. ``slot`` is the
key without the version value: a table keeps only its latest entry.
"""

from alembic import op

revision = "0006_checksum"
down_revision = "0005_storage"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE pgeval.data_checksum (
    key         text PRIMARY KEY,              -- sha256 of identity, columns, filters, version
    slot        text NOT NULL,                 -- the same without the version value
    table_name  text NOT NULL,                 -- for display
    rows        bigint NOT NULL,
    checksum    text NOT NULL,
    version     jsonb NOT NULL,                -- what the key hashes (for inspection)
    computed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX data_checksum_slot ON pgeval.data_checksum (slot);
"""

DOWNGRADE = """
DROP TABLE pgeval.data_checksum;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
