"""One process verifies as an annotator at a time: `match_hold` records which (a random
session id, the machine and the process id, when it took the hold and when it was last
seen). A `thumb match annotate` takes it in the locked transaction that resumes or claims
the annotator's batch and checks it in the transaction of every answer; a second process
is refused (or, asked to, takes it over, and the first one's later answers are refused).
A new table: no existing row changes.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "match_hold",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=False),
        sa.Column("token", sa.String(), nullable=False),
        sa.Column("host", sa.String(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("length(token) > 0", name="match_hold_token_not_empty"),
        sa.CheckConstraint("pid > 0", name="match_hold_pid_positive"),
        sa.ForeignKeyConstraint(["annotator_id"], ["annotator.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("annotator_id", name="match_hold_one_per_annotator"),
    )


def downgrade() -> None:
    op.drop_table("match_hold")
