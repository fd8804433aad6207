"""ranked lists stored without pglz: scores never compressed, chunk ids by lz4 where the server has it

Revision ID: 0008_list_storage
Revises: 0007_run_rows
Create Date: 2026-11-30

A ranked list of about a hundred results or more (a row of ``pgeval.result_list`` over about
2 kB) is TOASTed, and PostgreSQL's default compression, pglz, then compresses its arrays as they are
written. Measured on 1,000 lists of 1,000 results (PostgreSQL 15, Debian's build):

- writing them took 0.62 s with pglz, 0.21 s with chunk ids by lz4 and scores stored as they are,
  the same 17 MB on disk; reading every chunk id back, 0.024 s against 0.011 s;
- scores (random doubles) never compress: pglz only tries. They are stored out of line as they are
  (``STORAGE EXTERNAL``).

Chunk ids are compressed by lz4 where the server is built with it (every PGDG and Debian build). A
server without lz4 (the embedded server of the tests) stores them uncompressed: on it, 0.45 s
against 1.0 s with pglz, and 25 MB against 17 MB; for 10,000 lists of 100 results, 0.34 s against
0.45 s, and 25.0 MB against 21.6 MB. Rows already stored keep their compression; reading them is
unchanged.
"""

from alembic import op

revision = "0008_list_storage"
down_revision = "0007_run_rows"
branch_labels = None
depends_on = None

UPGRADE = r"""
ALTER TABLE pgeval.result_list ALTER COLUMN scores SET STORAGE EXTERNAL;
DO $$
BEGIN
    ALTER TABLE pgeval.result_list ALTER COLUMN chunk_ids SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN  -- a server built without lz4
    ALTER TABLE pgeval.result_list ALTER COLUMN chunk_ids SET STORAGE EXTERNAL;
END
$$;
"""

DOWNGRADE = r"""
ALTER TABLE pgeval.result_list ALTER COLUMN scores SET STORAGE EXTENDED,
                               ALTER COLUMN chunk_ids SET STORAGE EXTENDED,
                               ALTER COLUMN chunk_ids SET COMPRESSION DEFAULT;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
