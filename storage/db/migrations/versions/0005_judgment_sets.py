"""Judgment sets: human judgments from elsewhere (scores on a declared scale by any number
of judges, or choices between two captions), their images, references and captions, and
the metric scores of those captions.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "judgment_set",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("scale_min", sa.Float(), nullable=True),
        sa.Column("scale_max", sa.Float(), nullable=True),
        sa.Column("scale_step", sa.Float(), nullable=True),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("references_source", sa.String(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "(kind = 'score' AND scale_min IS NOT NULL AND scale_max > scale_min "
            "AND scale_step IN (0.5, 1)) OR (kind = 'pairwise' AND scale_min IS NULL "
            "AND scale_max IS NULL AND scale_step IS NULL)",
            name="judgment_set_scale_valid",
        ),
        sa.CheckConstraint("kind IN ('score', 'pairwise')", name="judgment_set_kind_valid"),
        sa.CheckConstraint("length(name) > 0", name="judgment_set_name_not_empty"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("id", "kind", name="judgment_set_id_kind"),
        sa.UniqueConstraint(
            "id", "scale_min", "scale_max", "scale_step", name="judgment_set_id_scale"
        ),
    )
    op.create_index("ix_judgment_set_name", "judgment_set", ["name"], unique=True)

    op.create_table(
        "judgment_image",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("set_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("path", sa.String(), nullable=True),
        sa.CheckConstraint("length(key) > 0", name="judgment_image_key_not_empty"),
        sa.ForeignKeyConstraint(["set_id"], ["judgment_set.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("id", "set_id", name="judgment_image_id_set"),
        sa.UniqueConstraint("set_id", "key", name="judgment_image_key_unique"),
    )
    op.create_index("ix_judgment_image_set_id", "judgment_image", ["set_id"], unique=False)

    op.create_table(
        "judgment_caption",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("set_id", sa.Integer(), nullable=False),
        sa.Column("image_id", sa.Integer(), nullable=False),
        sa.Column("text", sa.String(), nullable=False),
        sa.Column("external_id", sa.String(), nullable=True),
        sa.Column("system", sa.String(), nullable=True),
        sa.CheckConstraint("length(text) > 0", name="judgment_caption_text_not_empty"),
        sa.CheckConstraint(
            "system IS NULL OR length(system) > 0", name="judgment_caption_system_not_empty"
        ),
        sa.ForeignKeyConstraint(
            ["image_id", "set_id"],
            ["judgment_image.id", "judgment_image.set_id"],
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("id", "image_id", name="judgment_caption_id_image"),
        sa.UniqueConstraint("id", "set_id", name="judgment_caption_id_set"),
        sa.UniqueConstraint("set_id", "external_id", name="judgment_caption_id_unique"),
    )
    op.create_index("ix_judgment_caption_image_id", "judgment_caption", ["image_id"], unique=False)
    op.create_index("ix_judgment_caption_set_id", "judgment_caption", ["set_id"], unique=False)

    op.create_table(
        "judgment_reference",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("image_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("text", sa.String(), nullable=False),
        sa.CheckConstraint("length(text) > 0", name="judgment_reference_text_not_empty"),
        sa.CheckConstraint("position >= 0", name="judgment_reference_position_non_negative"),
        sa.ForeignKeyConstraint(["image_id"], ["judgment_image.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("image_id", "position", name="judgment_reference_position_unique"),
    )
    op.create_index(
        "ix_judgment_reference_image_id", "judgment_reference", ["image_id"], unique=False
    )

    op.create_table(
        "judgment_metric_score",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("caption_id", sa.Integer(), nullable=False),
        sa.Column("metric", sa.String(), nullable=False),
        sa.Column("signature", sa.String(), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("length(metric) > 0", name="judgment_metric_score_metric_not_empty"),
        sa.ForeignKeyConstraint(["caption_id"], ["judgment_caption.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("caption_id", "signature", name="judgment_metric_score_unique"),
    )
    op.create_index(
        "ix_judgment_metric_score_caption_id", "judgment_metric_score", ["caption_id"], unique=False
    )
    op.create_index(
        "ix_judgment_metric_score_metric", "judgment_metric_score", ["metric"], unique=False
    )
    op.create_index(
        "ix_judgment_metric_score_signature", "judgment_metric_score", ["signature"], unique=False
    )

    op.create_table(
        "judgment_pair",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("set_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("image_id", sa.Integer(), nullable=False),
        sa.Column("caption_a_id", sa.Integer(), nullable=False),
        sa.Column("caption_b_id", sa.Integer(), nullable=False),
        sa.Column("judge", sa.String(), nullable=False),
        sa.Column("choice", sa.String(), nullable=False),
        sa.Column("category", sa.String(), nullable=True),
        sa.CheckConstraint("choice IN ('a', 'b', 'tie')", name="judgment_pair_choice_valid"),
        sa.CheckConstraint("kind = 'pairwise'", name="judgment_pair_in_pairwise_set"),
        sa.CheckConstraint("caption_a_id <> caption_b_id", name="judgment_pair_two_captions"),
        sa.CheckConstraint(
            "category IS NULL OR length(category) > 0", name="judgment_pair_category_not_empty"
        ),
        sa.CheckConstraint("length(judge) > 0", name="judgment_pair_judge_not_empty"),
        sa.ForeignKeyConstraint(
            ["caption_a_id", "image_id"],
            ["judgment_caption.id", "judgment_caption.image_id"],
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["caption_b_id", "image_id"],
            ["judgment_caption.id", "judgment_caption.image_id"],
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["image_id", "set_id"],
            ["judgment_image.id", "judgment_image.set_id"],
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["set_id", "kind"], ["judgment_set.id", "judgment_set.kind"], ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(
            "caption_a_id", "caption_b_id", "judge", name="judgment_pair_one_per_judge"
        ),
    )
    op.create_index("ix_judgment_pair_set_id", "judgment_pair", ["set_id"], unique=False)

    op.create_table(
        "judgment_score",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("set_id", sa.Integer(), nullable=False),
        sa.Column("caption_id", sa.Integer(), nullable=False),
        sa.Column("judge", sa.String(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("scale_min", sa.Float(), nullable=False),
        sa.Column("scale_max", sa.Float(), nullable=False),
        sa.Column("scale_step", sa.Float(), nullable=False),
        sa.Column("note", sa.String(), nullable=False),
        sa.CheckConstraint("length(judge) > 0", name="judgment_score_judge_not_empty"),
        sa.CheckConstraint(
            "score >= scale_min AND score <= scale_max AND "
            "(score - scale_min) / scale_step = round((score - scale_min) / scale_step)",
            name="judgment_score_on_scale",
        ),
        sa.ForeignKeyConstraint(
            ["caption_id", "set_id"],
            ["judgment_caption.id", "judgment_caption.set_id"],
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["set_id", "scale_min", "scale_max", "scale_step"],
            [
                "judgment_set.id",
                "judgment_set.scale_min",
                "judgment_set.scale_max",
                "judgment_set.scale_step",
            ],
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("caption_id", "judge", name="judgment_score_one_per_judge"),
    )
    op.create_index("ix_judgment_score_caption_id", "judgment_score", ["caption_id"], unique=False)
    op.create_index("ix_judgment_score_set_id", "judgment_score", ["set_id"], unique=False)
