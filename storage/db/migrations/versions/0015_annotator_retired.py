"""An annotator can be retired (`thumb annotator retire`): `annotator.retired_at`, when the
lead retired them. A retired annotator takes no new claim; their ratings, claims and
event-log history stay. Existing annotators stay active (NULL); no row changes.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("annotator",
                  sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    # ALTER TABLE, not a batch: SQLite would copy the table and drop the old one, which
    # the foreign keys of every annotator's ratings and claims refuse
    op.drop_column("annotator", "retired_at")
