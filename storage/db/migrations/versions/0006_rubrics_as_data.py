"""Rubrics as data: the database stores each rubric a rating was made with (`rubric`) and
the values it allows in every rating column (`rubric_range`); triggers refuse a rating or
fluency check whose values its rubric does not allow. These replace THUMB 1.0's hard-coded
CHECK constraints (P and R in 1-5, conciseness 0 or 0.5, inclusive 0, 0.5 or 2, fluency
0-5). Every rating and fluency check names its rubric (a foreign key); THUMB 1.0 is
registered in every database and is the project's rubric until another is chosen.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from rubrics import load_rubric

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

COLUMNS = ("precision", "recall", "fluency", "conciseness", "inclusive")
CHECKED = {"rating": COLUMNS, "fluency_check": ("fluency",)}
OLD_RATING_CHECKS = ("rating_precision_1_5", "rating_recall_1_5", "rating_fluency_range",
                     "rating_conciseness_valid", "rating_inclusive_valid",
                     "rating_rubric_not_empty")
# Penalty sums of 0.1 steps are not exact in binary.
EPSILON = 1e-9


def _outside(table: str, column: str, row: str) -> str:
    """SQL true when `row`.column is set and no range of its rubric holds it."""
    return (f"{row}.{column} IS NOT NULL AND NOT EXISTS (SELECT 1 FROM rubric_range r "
            f"WHERE r.rubric = {row}.rubric AND r.field = '{column}' AND {row}.{column} "
            f"BETWEEN r.low - {EPSILON} AND r.high + {EPSILON})")


def _create_triggers(dialect: str) -> None:
    for table, columns in CHECKED.items():
        for column in columns:
            name = f"{table}_{column}_on_rubric"
            message = f"{table}.{column}: a value its rubric does not allow"
            if dialect == "postgresql":
                op.execute(f"""CREATE OR REPLACE FUNCTION {name}() RETURNS trigger AS $$
                    BEGIN
                        IF {_outside(table, column, "NEW")} THEN
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
                    BEFORE {event} ON {table} WHEN {_outside(table, column, "NEW")}
                    BEGIN SELECT RAISE(ABORT, '{message}'); END""")


def upgrade() -> None:
    op.create_table(
        "rubric",
        sa.Column("signature", sa.String(), nullable=False),
        sa.Column("rubric_id", sa.String(), nullable=False),
        sa.Column("version", sa.String(), nullable=False),
        sa.Column("title", sa.String(), nullable=False),
        sa.Column("definition", sa.String(), nullable=False),
        sa.Column("registered_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("chosen_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("length(signature) > 0", name="rubric_signature_not_empty"),
        sa.PrimaryKeyConstraint("signature"),
    )
    op.create_table(
        "rubric_range",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("rubric", sa.String(), nullable=False),
        sa.Column("field", sa.String(), nullable=False),
        sa.Column("low", sa.Float(), nullable=False),
        sa.Column("high", sa.Float(), nullable=False),
        sa.CheckConstraint("field IN ('precision', 'recall', 'fluency', 'conciseness', "
                           "'inclusive')", name="rubric_range_field_valid"),
        sa.CheckConstraint("low <= high", name="rubric_range_ordered"),
        sa.ForeignKeyConstraint(["rubric"], ["rubric.signature"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("rubric", "field", "low", "high", name="rubric_range_unique"),
    )
    bind = op.get_bind()
    unknown = bind.execute(sa.text(
        "SELECT DISTINCT rubric FROM rating WHERE rubric <> 'thumb-1.0'")).scalars().all()
    if unknown:
        raise RuntimeError(f"ratings made with rubrics this upgrade cannot read back "
                           f"({', '.join(unknown)}); only thumb-1.0 was ever shipped")
    thumb = load_rubric("thumb-1.0")
    now = datetime.now(UTC)
    op.bulk_insert(
        sa.table("rubric", *(sa.column(c) for c in ("signature", "rubric_id", "version",
                                                   "title", "definition", "registered_at",
                                                   "chosen_at"))),
        [{"signature": thumb.signature, "rubric_id": thumb.id, "version": thumb.version,
          "title": thumb.title, "definition": json.dumps(dict(thumb.definition), sort_keys=True),
          "registered_at": now, "chosen_at": now}],
    )
    op.bulk_insert(
        sa.table("rubric_range", *(sa.column(c) for c in ("rubric", "field", "low", "high"))),
        [{"rubric": thumb.signature, "field": field, "low": low, "high": high}
         for field, ranges in thumb.allowed_ranges().items() for low, high in ranges],
    )
    with op.batch_alter_table("rating") as batch:
        for name in OLD_RATING_CHECKS:
            batch.drop_constraint(name, type_="check")
        batch.create_foreign_key("rating_rubric_fkey", "rubric", ["rubric"], ["signature"],
                                 ondelete="RESTRICT")
    op.add_column("fluency_check", sa.Column("rubric", sa.String(), nullable=True))
    op.execute("UPDATE fluency_check SET rubric = 'thumb-1.0'")
    with op.batch_alter_table("fluency_check") as batch:
        batch.alter_column("rubric", existing_type=sa.String(), nullable=False)
        batch.drop_constraint("fluency_check_range", type_="check")
        batch.create_foreign_key("fluency_check_rubric_fkey", "rubric", ["rubric"],
                                 ["signature"], ondelete="RESTRICT")
    _create_triggers(bind.dialect.name)
