"""A metric score may be undefined: `value` becomes nullable and `undefined` holds the
reason (e.g. "no references"); exactly one of the two is set. For the project's scores and
the judgment sets' alike.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

TABLES = ("metric_score", "judgment_metric_score")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("undefined", sa.String(), nullable=True))
            batch.alter_column("value", existing_type=sa.Float(), nullable=True)
            batch.create_check_constraint(f"{table}_value_or_reason",
                                          "(value IS NULL) = (undefined IS NOT NULL)")
            batch.create_check_constraint(f"{table}_reason_not_empty",
                                          "undefined IS NULL OR length(undefined) > 0")


def downgrade() -> None:
    for table in TABLES:
        op.execute(f"DELETE FROM {table} WHERE value IS NULL")
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(f"{table}_reason_not_empty", type_="check")
            batch.drop_constraint(f"{table}_value_or_reason", type_="check")
            batch.alter_column("value", existing_type=sa.Float(), nullable=False)
            batch.drop_column("undefined")
