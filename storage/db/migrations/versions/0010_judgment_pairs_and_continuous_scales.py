"""Judgment sets: the (image, caption) pair is the unit, continuous scales, reference ids.

- `judgment_caption`: a caption id is unique per image, no longer per set (crowd-sourced
  pair datasets judge one candidate sentence against many images).
- `judgment_set` and `judgment_score`: a score set's scale step may be 0, a continuous
  scale (any real number in the range, e.g. crowd proportions); the database still
  refuses a score out of the range, and a step of 1 or 0.5 still holds scores to whole
  numbers or halves.
- `judgment_reference.external_id`: a reference's id in its file (`reference_id`, or a
  COCO annotation's `id`), so that a caption with the same id is left out of its own
  references by id instead of by text.

On SQLite a changed constraint means copying the table, and a table that other tables'
rows point to cannot be dropped while the foreign keys are checked (the upgrade runs in
one transaction, where `PRAGMA foreign_keys` cannot change). So the judgment tables' rows
are set aside in temporary tables, the tables are rebuilt empty and the rows go back with
their ids. PostgreSQL alters the constraints in place.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

# parents before the tables whose rows point to them
TABLES = ("judgment_set", "judgment_image", "judgment_reference", "judgment_caption",
          "judgment_score", "judgment_pair", "judgment_metric_score")

OLD_SCALE = ("(kind = 'score' AND scale_min IS NOT NULL AND scale_max > scale_min "
             "AND scale_step IN (0.5, 1)) OR (kind = 'pairwise' AND scale_min IS NULL "
             "AND scale_max IS NULL AND scale_step IS NULL)")
NEW_SCALE = ("(kind = 'score' AND scale_min IS NOT NULL AND scale_max > scale_min "
             "AND scale_step IN (0, 0.5, 1)) OR (kind = 'pairwise' AND scale_min IS NULL "
             "AND scale_max IS NULL AND scale_step IS NULL)")
OLD_ON_SCALE = ("score >= scale_min AND score <= scale_max AND "
                "(score - scale_min) / scale_step = round((score - scale_min) / scale_step)")
NEW_ON_SCALE = ("score >= scale_min AND score <= scale_max AND (scale_step = 0 OR "
                "(score - scale_min) / NULLIF(scale_step, 0) = "
                "round((score - scale_min) / NULLIF(scale_step, 0)))")


def _set_rows_aside() -> dict[str, list[str]]:
    """SQLite: every judgment row into a temporary table, the tables emptied (children
    first); returns each table's columns."""
    bind = op.get_bind()
    columns = {table: [c["name"] for c in sa.inspect(bind).get_columns(table)]
               for table in TABLES}
    for table in TABLES:
        op.execute(f"CREATE TEMP TABLE keep_{table} AS SELECT * FROM {table}")
    for table in reversed(TABLES):
        op.execute(f"DELETE FROM {table}")
    return columns


def _put_rows_back(columns: dict[str, list[str]]) -> None:
    for table in TABLES:
        names = ", ".join(columns[table])
        op.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM temp.keep_{table}")
        op.execute(f"DROP TABLE temp.keep_{table}")


def _alter(scale: str, on_scale: str, caption_unique: tuple[str, list[str]],
           old_caption_unique: str, references: bool) -> None:
    with op.batch_alter_table("judgment_set") as batch:
        batch.drop_constraint("judgment_set_scale_valid", type_="check")
        batch.create_check_constraint("judgment_set_scale_valid", scale)
    with op.batch_alter_table("judgment_caption") as batch:
        batch.drop_constraint(old_caption_unique, type_="unique")
        batch.create_unique_constraint(*caption_unique)
    with op.batch_alter_table("judgment_score") as batch:
        batch.drop_constraint("judgment_score_on_scale", type_="check")
        batch.create_check_constraint("judgment_score_on_scale", on_scale)
    with op.batch_alter_table("judgment_reference") as batch:
        if references:
            batch.add_column(sa.Column("external_id", sa.String(), nullable=True))
            batch.create_unique_constraint("judgment_reference_id_unique",
                                           ["image_id", "external_id"])
            batch.create_check_constraint("judgment_reference_id_not_empty",
                                          "external_id IS NULL OR length(external_id) > 0")
        else:
            batch.drop_constraint("judgment_reference_id_not_empty", type_="check")
            batch.drop_constraint("judgment_reference_id_unique", type_="unique")
            batch.drop_column("external_id")


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    columns = _set_rows_aside() if sqlite else None
    _alter(NEW_SCALE, NEW_ON_SCALE,
           ("judgment_caption_id_per_image", ["set_id", "image_id", "external_id"]),
           "judgment_caption_id_unique", references=True)
    if columns is not None:
        _put_rows_back(columns)


def downgrade() -> None:
    """Only a database without continuous sets and without a caption id repeated across
    images goes back (the old constraints refuse them); reference ids are dropped."""
    sqlite = op.get_bind().dialect.name == "sqlite"
    columns = _set_rows_aside() if sqlite else None
    if columns is not None:
        columns["judgment_reference"].remove("external_id")
    _alter(OLD_SCALE, OLD_ON_SCALE,
           ("judgment_caption_id_unique", ["set_id", "external_id"]),
           "judgment_caption_id_per_image", references=False)
    if columns is not None:
        _put_rows_back(columns)
