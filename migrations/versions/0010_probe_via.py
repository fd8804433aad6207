"""pgeval.probe.via: which path measured a probe ('cli': `pgeval watch`, 'sql': pgeval.run_probe)

Revision ID: 0010_probe_via
Revises: 0009_probe
Create Date: 2026-12-02

A probe is measured by the command line (`pgeval watch`, evaluator/tuning/watch/probe.py, the
reference path) or inside the database by pgeval.run_probe (sql/220_run_probe.sql), which pg_cron
can call where the knowledge base's table and pgeval's schema share a database. The two time
their statements from different places (a client's round trip against clock_timestamp() around
EXECUTE), so their probes are two series in pgeval.probe_history. Rows written before this
revision were all measured by the command line.
"""

from alembic import op

revision = "0010_probe_via"
down_revision = "0009_probe"
branch_labels = None
depends_on = None

UPGRADE = """
ALTER TABLE pgeval.probe
    ADD COLUMN via text NOT NULL DEFAULT 'cli' CONSTRAINT probe_via_check CHECK (via IN ('cli', 'sql'));
"""

# the view reads the column: drop it first (`pgeval init` re-creates it from sql/)
DOWNGRADE = """
DROP VIEW IF EXISTS pgeval.probe_history;
ALTER TABLE pgeval.probe DROP COLUMN via;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
