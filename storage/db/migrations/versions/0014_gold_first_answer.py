"""A gold answer keeps the values it had the first moment it was complete (`first_*` and
`first_answered_at` on `gold_answer`): the accuracy scores those, so an annotator who reads
the feedback, goes back and types the right answer no longer raises it; the answer's own
columns keep every later change, as the event log does.

Existing answers get their first complete values from the event log, replayed in order
(each answer's rows, a change id at a time, from the empty answer a session starts from);
an answer without events keeps its values as they stand. No other row changes.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

SCORES = ("precision", "recall")  # complete: both set (THUMB 1.0's dimensions)
SCORED = (*SCORES, "fluency", "conciseness", "inclusive")
EMPTY = {**dict.fromkeys(SCORES), "fluency": 0.0, "conciseness": 0.0, "inclusive": 0.0}


def _first_answers(connection: sa.Connection) -> dict[int, tuple[dict, object]]:
    """Answer id -> (its values the first time it was complete, when), from the event
    log: each change (one change id) applied in turn to the empty answer."""
    replayed: dict[int, dict] = {}
    first: dict[int, tuple[dict, object]] = {}
    events = connection.execute(sa.text(
        "SELECT row_id, field_name, new_value, change_id, at FROM event_log "
        "WHERE table_name = 'gold_answer' AND row_id IS NOT NULL ORDER BY id")).all()
    for index, event in enumerate(events):
        values = replayed.setdefault(event.row_id, dict(EMPTY))
        if event.field_name in values:
            values[event.field_name] = json.loads(event.new_value)
        change_ends = index + 1 == len(events) or (
            (events[index + 1].row_id, events[index + 1].change_id)
            != (event.row_id, event.change_id))
        if change_ends and event.row_id not in first and all(
                values[key] is not None for key in SCORES):
            first[event.row_id] = (dict(values), event.at)
    return first


def upgrade() -> None:
    # ALTER TABLE, not a batch: SQLite would copy the table and lose its 0012 triggers
    for score in SCORES:
        op.add_column("gold_answer", sa.Column(f"first_{score}", sa.Integer(), nullable=True))
    for penalty in SCORED[len(SCORES):]:
        op.add_column("gold_answer", sa.Column(f"first_{penalty}", sa.Float(), nullable=True))
    op.add_column("gold_answer", sa.Column("first_answered_at", sa.DateTime(timezone=True),
                                           nullable=True))
    connection = op.get_bind()
    first = _first_answers(connection)
    for row in connection.execute(sa.text(
            "SELECT id, precision, recall, fluency, conciseness, inclusive, updated_at "
            "FROM gold_answer WHERE precision IS NOT NULL AND recall IS NOT NULL")):
        first.setdefault(row.id, ({key: getattr(row, key) for key in SCORED},
                                  row.updated_at))
    for answer_id, (values, at) in first.items():
        connection.execute(sa.text(
            "UPDATE gold_answer SET first_answered_at = :at, "
            + ", ".join(f"first_{key} = :{key}" for key in SCORED) + " WHERE id = :id"),
            {"id": answer_id, "at": at, **{key: values[key] for key in SCORED}})


def downgrade() -> None:
    for column in ("first_answered_at", *(f"first_{key}" for key in reversed(SCORED))):
        op.drop_column("gold_answer", column)
