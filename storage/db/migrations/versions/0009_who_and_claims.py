"""Who did it, and claims on images.

The event log records, beside the name the user gave, the OS login of the process and, on
PostgreSQL, the database role (a trigger sets it from `session_user`, whatever the client
sends). An assignment at stage 1 or 2 becomes the annotator's claim on the image, held
until `released_at`; assignments of images the annotator only looked at (no rating of
theirs there at that stage) are released, as leaving such an image now does.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("event_log", sa.Column("os_login", sa.String(), nullable=True))
    op.add_column("event_log", sa.Column("db_role", sa.String(), nullable=True))
    op.add_column("assignment",
                  sa.Column("released_at", sa.DateTime(timezone=True), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            """CREATE OR REPLACE FUNCTION event_log_db_role() RETURNS trigger AS $$
            BEGIN NEW.db_role := session_user; RETURN NEW; END $$ LANGUAGE plpgsql"""
        )
        op.execute(
            """CREATE TRIGGER event_log_db_role BEFORE INSERT ON event_log
            FOR EACH ROW EXECUTE FUNCTION event_log_db_role()"""
        )
    assignment = sa.table("assignment", sa.column("image_id"), sa.column("annotator_id"),
                          sa.column("stage"), sa.column("released_at"))
    rating = sa.table("rating", sa.column("caption_id"), sa.column("annotator_id"),
                      sa.column("stage"))
    caption = sa.table("caption", sa.column("id"), sa.column("image_id"))
    rated = sa.exists().where(
        rating.c.caption_id == caption.c.id, caption.c.image_id == assignment.c.image_id,
        rating.c.annotator_id == assignment.c.annotator_id,
        rating.c.stage == assignment.c.stage)
    op.execute(sa.update(assignment).where(assignment.c.stage <= 2, ~rated)
               .values(released_at=datetime.now(UTC)))
