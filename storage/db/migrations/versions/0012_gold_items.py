"""Gold items in THUMB rating: captions with known acceptable answers (`gold_image`,
`gold_caption`), seeded into annotators' stage-1 queues at the rate of `gold_setting` (one
row), answered into `gold_answer`. They live apart from image/caption/rating, so no
analysis, report, export, status count or protocol rule can see them. Triggers check a
gold caption's P/R ranges and an answer's values against `rubric_range`, like a rating's.
New tables: no existing row changes.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# Penalty sums of 0.1 steps are not exact in binary (as in 0006).
EPSILON = 1e-9
# (table, column) -> the rubric_range field its values must lie in
CHECKED = {
    **{("gold_caption", f"{score}_{end}"): score
       for score in ("precision", "recall") for end in ("min", "max")},
    **{("gold_answer", column): column
       for column in ("precision", "recall", "fluency", "conciseness", "inclusive")},
}


def _outside(column: str, field: str, row: str) -> str:
    return (f"{row}.{column} IS NOT NULL AND NOT EXISTS (SELECT 1 FROM rubric_range r "
            f"WHERE r.rubric = {row}.rubric AND r.field = '{field}' AND {row}.{column} "
            f"BETWEEN r.low - {EPSILON} AND r.high + {EPSILON})")


def _create_triggers(dialect: str) -> None:
    for (table, column), field in CHECKED.items():
        name = f"{table}_{column}_on_rubric"
        message = f"{table}.{column}: a value its rubric does not allow"
        if dialect == "postgresql":
            op.execute(f"""CREATE OR REPLACE FUNCTION {name}() RETURNS trigger AS $$
                BEGIN
                    IF {_outside(column, field, "NEW")} THEN
                        RAISE EXCEPTION '{message} (%, rubric %)', NEW.{column},
                            NEW.rubric USING ERRCODE = 'check_violation';
                    END IF;
                    RETURN NEW;
                END $$ LANGUAGE plpgsql""")
            op.execute(f"""CREATE TRIGGER {name} BEFORE INSERT OR UPDATE OF {column},
                rubric ON {table} FOR EACH ROW EXECUTE FUNCTION {name}()""")
            continue
        for event in ("INSERT", f"UPDATE OF {column}, rubric"):
            op.execute(f"""CREATE TRIGGER {name}_{event.split()[0].lower()}
                BEFORE {event} ON {table} WHEN {_outside(column, field, "NEW")}
                BEGIN SELECT RAISE(ABORT, '{message}'); END""")


def upgrade() -> None:
    op.create_table(
        "gold_setting",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("rate", sa.Float(), nullable=False),
        sa.Column("feedback", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("id = 1", name="gold_setting_one_row"),
        sa.CheckConstraint("rate >= 0 AND rate <= 0.5", name="gold_setting_rate_range"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "gold_image",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("path", sa.String(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("length(key) > 0", name="gold_image_key_not_empty"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key"),
    )
    op.create_table(
        "gold_caption",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("gold_image_id", sa.Integer(), nullable=False),
        sa.Column("text", sa.String(), nullable=False),
        sa.Column("precision_min", sa.Integer(), nullable=False),
        sa.Column("precision_max", sa.Integer(), nullable=False),
        sa.Column("recall_min", sa.Integer(), nullable=False),
        sa.Column("recall_max", sa.Integer(), nullable=False),
        sa.Column("fluency_max", sa.Float(), nullable=False),
        sa.Column("conciseness_max", sa.Float(), nullable=False),
        sa.Column("inclusive_max", sa.Float(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("rubric", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("fluency_max >= 0 AND conciseness_max >= 0 AND inclusive_max >= 0",
                           name="gold_caption_penalties_non_negative"),
        sa.CheckConstraint("length(reason) > 0", name="gold_caption_reason_not_empty"),
        sa.CheckConstraint("length(text) > 0", name="gold_caption_text_not_empty"),
        sa.CheckConstraint("precision_min <= precision_max",
                           name="gold_caption_precision_ordered"),
        sa.CheckConstraint("recall_min <= recall_max", name="gold_caption_recall_ordered"),
        sa.ForeignKeyConstraint(["gold_image_id"], ["gold_image.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["rubric"], ["rubric.signature"],
                                name="gold_caption_rubric_fkey", ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("gold_image_id", "text", name="gold_caption_unique"),
    )
    op.create_index("ix_gold_caption_gold_image_id", "gold_caption", ["gold_image_id"])
    op.create_table(
        "gold_answer",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("gold_caption_id", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=False),
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
        sa.CheckConstraint("seconds >= 0", name="gold_answer_seconds_non_negative"),
        sa.ForeignKeyConstraint(["annotator_id"], ["annotator.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["gold_caption_id"], ["gold_caption.id"],
                                ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["rubric"], ["rubric.signature"],
                                name="gold_answer_rubric_fkey", ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("gold_caption_id", "annotator_id", name="gold_answer_unique"),
    )
    op.create_index("ix_gold_answer_annotator_id", "gold_answer", ["annotator_id"])
    op.create_index("ix_gold_answer_gold_caption_id", "gold_answer", ["gold_caption_id"])
    _create_triggers(op.get_bind().dialect.name)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for (table, column) in CHECKED:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_{column}_on_rubric ON {table}")
            op.execute(f"DROP FUNCTION IF EXISTS {table}_{column}_on_rubric()")
    op.drop_table("gold_answer")  # SQLite drops a table's triggers with it
    op.drop_table("gold_caption")
    op.drop_table("gold_image")
    op.drop_table("gold_setting")
