"""The schema of thumb-tui 0.1.0, the last release before Alembic: every table, its CHECK
constraints, and the triggers that keep the event log append-only.

A database made by 0.1.0 carries `schema_version` 1 and no `alembic_version`; opening it
stamps it at this revision (storage.db.migrations), so only the later revisions run on it.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "annotator",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("native_english", sa.Boolean(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("length(name) > 0", name="annotator_name_not_empty"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_annotator_name", "annotator", ["name"], unique=True)

    op.create_table(
        "event_log",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("action", sa.String(), nullable=False),
        sa.Column("table_name", sa.String(), nullable=False),
        sa.Column("row_id", sa.Integer(), nullable=True),
        sa.Column("field_name", sa.String(), nullable=True),
        sa.Column("old_value", sa.String(), nullable=True),
        sa.Column("new_value", sa.String(), nullable=True),
        sa.Column("change_id", sa.String(), nullable=True),
        sa.Column("reverts", sa.String(), nullable=True),
        sa.CheckConstraint("length(actor) > 0", name="event_actor_not_empty"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_event_log_change_id", "event_log", ["change_id"], unique=False)
    op.create_index("ix_event_log_reverts", "event_log", ["reverts"], unique=False)

    op.create_table(
        "image",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("path", sa.String(), nullable=True),
        sa.Column("set_id", sa.Integer(), nullable=True),
        sa.Column("double_rating", sa.Boolean(), nullable=False),
        sa.CheckConstraint("length(key) > 0", name="image_key_not_empty"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_image_key", "image", ["key"], unique=True)

    op.create_table(
        "schema_version",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("applied_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "assignment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("image_id", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=False),
        sa.Column("stage", sa.Integer(), nullable=False),
        sa.Column("shuffle_seed", sa.Integer(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("focus", sa.Integer(), nullable=False),
        sa.Column("last_viewed_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("focus >= 0", name="assignment_focus_non_negative"),
        sa.CheckConstraint("seconds >= 0", name="assignment_seconds_non_negative"),
        sa.CheckConstraint("stage IN (1, 2, 3)", name="assignment_stage_valid"),
        sa.ForeignKeyConstraint(["annotator_id"], ["annotator.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["image_id"], ["image.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("image_id", "annotator_id", "stage", name="assignment_unique"),
    )
    op.create_index("ix_assignment_annotator_id", "assignment", ["annotator_id"], unique=False)
    op.create_index("ix_assignment_image_id", "assignment", ["image_id"], unique=False)

    op.create_table(
        "bison_item",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("query", sa.String(), nullable=False),
        sa.Column("caption_key", sa.String(), nullable=True),
        sa.Column("image_a_id", sa.Integer(), nullable=False),
        sa.Column("image_b_id", sa.Integer(), nullable=False),
        sa.Column("true_image_id", sa.Integer(), nullable=False),
        sa.CheckConstraint("image_a_id <> image_b_id", name="bison_two_images"),
        sa.CheckConstraint("length(query) > 0", name="bison_query_not_empty"),
        sa.CheckConstraint(
            "true_image_id IN (image_a_id, image_b_id)", name="bison_true_image_is_a_candidate"
        ),
        sa.ForeignKeyConstraint(["image_a_id"], ["image.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["image_b_id"], ["image.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["true_image_id"], ["image.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_bison_item_key", "bison_item", ["key"], unique=True)

    op.create_table(
        "caption",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("image_id", sa.Integer(), nullable=False),
        sa.Column("system", sa.String(), nullable=False),
        sa.Column("text", sa.String(), nullable=False),
        sa.Column("external_id", sa.String(), nullable=True),
        sa.CheckConstraint("length(system) > 0", name="caption_system_not_empty"),
        sa.CheckConstraint("length(text) > 0", name="caption_text_not_empty"),
        sa.ForeignKeyConstraint(["image_id"], ["image.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("external_id"),
        sa.UniqueConstraint("image_id", "system", name="caption_one_per_system"),
    )
    op.create_index("ix_caption_image_id", "caption", ["image_id"], unique=False)

    op.create_table(
        "image_reference",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("image_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("text", sa.String(), nullable=False),
        sa.CheckConstraint("length(text) > 0", name="reference_text_not_empty"),
        sa.CheckConstraint("position >= 0", name="reference_position_non_negative"),
        sa.ForeignKeyConstraint(["image_id"], ["image.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("image_id", "position", name="reference_position_unique"),
    )
    op.create_index("ix_image_reference_image_id", "image_reference", ["image_id"], unique=False)

    op.create_table(
        "bison_answer",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=False),
        sa.Column("left_image_id", sa.Integer(), nullable=False),
        sa.Column("answer", sa.String(), nullable=True),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "answer IS NULL OR answer IN ('left', 'right', 'both', 'neither')",
            name="bison_answer_valid",
        ),
        sa.CheckConstraint("seconds >= 0", name="bison_answer_seconds"),
        sa.ForeignKeyConstraint(["annotator_id"], ["annotator.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["item_id"], ["bison_item.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["left_image_id"], ["image.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("item_id", "annotator_id", name="bison_answer_unique"),
    )
    op.create_index("ix_bison_answer_annotator_id", "bison_answer", ["annotator_id"], unique=False)
    op.create_index("ix_bison_answer_item_id", "bison_answer", ["item_id"], unique=False)

    op.create_table(
        "bison_prediction",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("scorer", sa.String(), nullable=False),
        sa.Column("signature", sa.String(), nullable=False),
        sa.Column("score_a", sa.Float(), nullable=False),
        sa.Column("score_b", sa.Float(), nullable=False),
        sa.Column("chosen_image_id", sa.Integer(), nullable=True),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["chosen_image_id"],
            ["image.id"],
        ),
        sa.ForeignKeyConstraint(["item_id"], ["bison_item.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("item_id", "signature", name="bison_prediction_unique"),
    )
    op.create_index("ix_bison_prediction_item_id", "bison_prediction", ["item_id"], unique=False)
    op.create_index(
        "ix_bison_prediction_signature", "bison_prediction", ["signature"], unique=False
    )

    op.create_table(
        "fluency_check",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("caption_id", sa.Integer(), nullable=False),
        sa.Column("checker_id", sa.Integer(), nullable=False),
        sa.Column("fluency", sa.Float(), nullable=False),
        sa.Column("fluency_type", sa.String(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("fluency >= 0 AND fluency <= 5", name="fluency_check_range"),
        sa.ForeignKeyConstraint(["caption_id"], ["caption.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["checker_id"], ["annotator.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("caption_id"),
    )
    op.create_table(
        "metric_score",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("caption_id", sa.Integer(), nullable=False),
        sa.Column("metric", sa.String(), nullable=False),
        sa.Column("signature", sa.String(), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("length(metric) > 0", name="metric_score_metric_not_empty"),
        sa.ForeignKeyConstraint(["caption_id"], ["caption.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("caption_id", "signature", name="metric_score_unique"),
    )
    op.create_index("ix_metric_score_caption_id", "metric_score", ["caption_id"], unique=False)
    op.create_index("ix_metric_score_metric", "metric_score", ["metric"], unique=False)
    op.create_index("ix_metric_score_signature", "metric_score", ["signature"], unique=False)

    op.create_table(
        "rating",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("caption_id", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=False),
        sa.Column("stage", sa.Integer(), nullable=False),
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
        sa.CheckConstraint("conciseness IN (0, 0.5)", name="rating_conciseness_valid"),
        sa.CheckConstraint("fluency >= 0 AND fluency <= 5", name="rating_fluency_range"),
        sa.CheckConstraint("inclusive IN (0, 0.5, 2)", name="rating_inclusive_valid"),
        sa.CheckConstraint("length(rubric) > 0", name="rating_rubric_not_empty"),
        sa.CheckConstraint(
            "precision IS NULL OR precision IN (1, 2, 3, 4, 5)", name="rating_precision_1_5"
        ),
        sa.CheckConstraint("recall IS NULL OR recall IN (1, 2, 3, 4, 5)", name="rating_recall_1_5"),
        sa.CheckConstraint("seconds >= 0", name="rating_seconds_non_negative"),
        sa.CheckConstraint("stage IN (1, 2, 3)", name="rating_stage_valid"),
        sa.ForeignKeyConstraint(["annotator_id"], ["annotator.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["caption_id"], ["caption.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("caption_id", "annotator_id", "stage", name="rating_unique"),
    )
    op.create_index("ix_rating_annotator_id", "rating", ["annotator_id"], unique=False)
    op.create_index("ix_rating_caption_id", "rating", ["caption_id"], unique=False)

    op.create_table(
        "resolution",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("caption_id", sa.Integer(), nullable=False),
        sa.Column("resolver_id", sa.Integer(), nullable=False),
        sa.Column("reasons", sa.String(), nullable=False),
        sa.Column("note", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("length(reasons) > 0", name="resolution_has_reason"),
        sa.ForeignKeyConstraint(["caption_id"], ["caption.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["resolver_id"], ["annotator.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("caption_id"),
    )

    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            """CREATE OR REPLACE FUNCTION event_log_append_only() RETURNS trigger AS $$
            BEGIN RAISE EXCEPTION 'event_log is append-only'; END $$ LANGUAGE plpgsql"""
        )
        op.execute(
            """CREATE TRIGGER event_log_append_only BEFORE UPDATE OR DELETE ON event_log
            FOR EACH ROW EXECUTE FUNCTION event_log_append_only()"""
        )
    else:
        for verb in ("update", "delete"):
            op.execute(
                f"""CREATE TRIGGER event_log_no_{verb} BEFORE {verb.upper()} ON event_log
                BEGIN SELECT RAISE(ABORT, 'event_log is append-only'); END"""
            )
