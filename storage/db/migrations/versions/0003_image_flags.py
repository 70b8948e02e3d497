"""image_flag: an annotator's report that an image cannot be rated, with the reason.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "image_flag",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("image_id", sa.Integer(), sa.ForeignKey("image.id", ondelete="RESTRICT"),
                  nullable=False),
        sa.Column("annotator_id", sa.Integer(),
                  sa.ForeignKey("annotator.id", ondelete="RESTRICT"), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("image_id", "annotator_id", name="image_flag_once"),
        sa.CheckConstraint("length(reason) > 0", name="image_flag_reason_not_empty"),
    )
    op.create_index("ix_image_flag_image_id", "image_flag", ["image_id"])
