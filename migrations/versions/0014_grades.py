"""test-set versions and model grades: the judging of a pool's holes

Revision ID: 0014_grades
Revises: 0012_captured
Create Date: 2026-12-07

``pgeval testset grade`` (evaluator/testset/versions.py) writes a new version of a test set: a
new ``pgeval.testset`` row whose ``parent_id`` is the version it grew from and ``version`` its
number in the lineage, holding the parent's judgements and the new ones. ``pgeval.qrel.source``
says who graded each judgement: ``human``, or the label of the model judge whose proposal a
version took in (only when asked). ``pgeval.model_grade`` keeps a judge's proposals apart from
every test set's judgements (docs/judging.md).
"""

from alembic import op

revision = "0014_grades"
down_revision = "0012_captured"
branch_labels = None
depends_on = None

UPGRADE = """
ALTER TABLE pgeval.testset
    ADD COLUMN parent_id bigint REFERENCES pgeval.testset ON DELETE SET NULL,
    ADD COLUMN version integer NOT NULL DEFAULT 1 CHECK (version >= 1);
ALTER TABLE pgeval.qrel ADD COLUMN source text NOT NULL DEFAULT 'human' CHECK (source <> '');
CREATE TABLE pgeval.model_grade (
    testset_id bigint NOT NULL REFERENCES pgeval.testset ON DELETE CASCADE,
    judge      text NOT NULL CHECK (judge <> ''),
    query_id   text COLLATE "C" NOT NULL,
    chunk_id   text COLLATE "C" NOT NULL,
    grade      smallint NOT NULL CHECK (grade BETWEEN 0 AND 3),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (testset_id, judge, query_id, chunk_id)
);
"""

DOWNGRADE = """
DROP TABLE pgeval.model_grade;
ALTER TABLE pgeval.qrel DROP COLUMN source;
ALTER TABLE pgeval.testset DROP COLUMN version, DROP COLUMN parent_id;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
