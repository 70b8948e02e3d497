"""Alembic takes over from `schema_version`: version 2 there makes thumb-tui 0.1.0 refuse
the database ("newer than this thumb-tui") instead of writing to a schema it does not know.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_version = sa.table(
        "schema_version", sa.column("version", sa.Integer), sa.column("applied_at", sa.DateTime)
    )
    op.bulk_insert(schema_version, [{"version": 2, "applied_at": datetime.now(UTC)}])
