"""A rating that the lead's `thumb release --image KEY --force` frees is moved, every
value as it was, into `released_rating` (with its id in `rating`, the claim it was made
under, when and by whom it was released) instead of being deleted: it stays in the
database, out of every analysis, protocol rule and annotator's view. Its values passed the
rating table's rubric triggers when written, so the new table has rating's CHECKs and no
triggers. A new table: no existing row changes.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "released_rating",
        sa.Column("precision", sa.Integer(), nullable=True),
        sa.Column("recall", sa.Integer(), nullable=True),
        sa.Column("fluency", sa.Float(), nullable=False),
        sa.Column("fluency_type", sa.String(), nullable=True),
        sa.Column("conciseness", sa.Float(), nullable=False),
        sa.Column("conciseness_type", sa.String(), nullable=True),
        sa.Column("inclusive", sa.Float(), nullable=False),
        sa.Column("inclusive_type", sa.String(), nullable=True),
        sa.Column("note", sa.String(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("rubric", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("rating_id", sa.Integer(), nullable=False),
        sa.Column("caption_id", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=False),
        sa.Column("stage", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("released_by", sa.String(), nullable=False),
        sa.CheckConstraint("stage IN (1, 2, 3)", name="released_rating_stage_valid"),
        sa.CheckConstraint("seconds >= 0", name="released_rating_seconds_non_negative"),
        sa.CheckConstraint("length(released_by) > 0", name="released_rating_by_not_empty"),
        sa.ForeignKeyConstraint(["annotator_id"], ["annotator.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["assignment_id"], ["assignment.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["caption_id"], ["caption.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["rubric"], ["rubric.signature"],
                                name="released_rating_rubric_fkey", ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
    )


def downgrade() -> None:
    """Refused while the table holds a rating: going back would lose it."""
    held = op.get_bind().execute(sa.text("SELECT count(*) FROM released_rating")).scalar_one()
    if held:
        raise RuntimeError(
            f"released_rating holds {held} rating(s) that `thumb release --force` set aside; "
            "a downgrade below 0016 would lose them")
    op.drop_table("released_rating")
