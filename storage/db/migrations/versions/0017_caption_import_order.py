"""A caption's id is drawn at random from #45 on (a team's annotators read caption ids, and
ids in import order ranked within an image listed its systems in the file's order), so the
order the imports gave the captions, which exports, frames and queues list them by, gets a
column of its own that no annotator's role reads: `caption.import_order`, indexed.

Existing captions were numbered in import order: each takes its id as its place. No other
row changes, and the existing ids stay (they keep their import order: SECURITY.md says what
a lead does before a team rates such a project).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # ALTER TABLE, not a batch: SQLite would copy the table
    op.add_column("caption", sa.Column("import_order", sa.Integer(), nullable=True))
    op.execute("UPDATE caption SET import_order = id")
    op.create_index("ix_caption_import_order", "caption", ["import_order"])


def downgrade() -> None:
    op.drop_index("ix_caption_import_order", table_name="caption")
    op.drop_column("caption", "import_order")
