"""The rubrics a database knows: each stored with the values it allows (which the
database's triggers enforce), read back from the database for totals and reports, and the
project's rubric for new ratings (the one chosen last, THUMB 1.0 in a new database)."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

from sqlalchemy import Connection, Engine, Row, Select, select, update
from sqlalchemy.exc import IntegrityError

from rubrics import Rubric, parse_rubric
from storage.models import RATING_VALUE_FIELDS, RubricRange, RubricRecord, utcnow


def _definition(rubric: Rubric) -> str:
    return json.dumps(dict(rubric.definition), sort_keys=True)


@cache
def _parse(definition: str) -> Rubric:
    """A stored rubric as it was stored: it passed the rubric schema on its way in (a
    later, stricter schema must not lock a database out of its own rubrics), and what it
    shows is escaped where it is shown."""
    return parse_rubric(json.loads(definition), check=False)


def register_rubric(connection: Connection, rubric: Rubric, *, choose: bool = False) -> None:
    """Store the rubric and the values it allows (once); with `choose`, make it the
    project's rubric for new ratings. A changed file under a stored id and version is
    refused: ratings made with the stored one must keep meaning what they meant."""
    table = RubricRecord.__table__
    stored = connection.execute(
        select(table.c.definition).where(table.c.signature == rubric.signature)
    ).scalar()
    now = utcnow()
    if stored is None:
        connection.execute(table.insert().values(
            signature=rubric.signature, rubric_id=rubric.id, version=rubric.version,
            title=rubric.title, definition=_definition(rubric), registered_at=now,
        ))
        connection.execute(RubricRange.__table__.insert(), [
            {"rubric": rubric.signature, "field": field, "low": low, "high": high}
            for field, ranges in rubric.allowed_ranges().items() for low, high in ranges
        ])
    elif _parse(stored) != rubric:
        raise ValueError(f"this database already has a different rubric {rubric.signature}; "
                         "a changed rubric file needs a new version")
    if choose:
        connection.execute(update(table).where(table.c.signature == rubric.signature)
                           .values(chosen_at=now))


def _rows(database: Engine | Connection, query: Select) -> list[Row]:
    if isinstance(database, Connection):
        return list(database.execute(query).all())
    with database.connect() as connection:
        return list(connection.execute(query).all())


def stored_rubrics(database: Engine | Connection) -> dict[str, Rubric]:
    """Every rubric of this database by signature (e.g. `thumb-1.0`)."""
    table = RubricRecord.__table__
    rows = _rows(database, select(table.c.signature, table.c.definition))
    return {signature: _parse(definition) for signature, definition in rows}


def project_rubric(database: Engine | Connection) -> Rubric:
    """The rubric new ratings are made with: the one chosen last."""
    table = RubricRecord.__table__
    (row,) = _rows(database, select(table.c.definition).where(table.c.chosen_at.is_not(None))
                   .order_by(table.c.chosen_at.desc()).limit(1))
    return _parse(row.definition)


# A trigger of migration 0006 that checks an inserted rating's value against rubric_range:
# its condition (on NEW) and its message.
_RATING_INSERT_TRIGGER = re.compile(
    r"BEFORE INSERT ON rating WHEN (?P<condition>.+?)\s+BEGIN SELECT RAISE\(ABORT, "
    r"'(?P<message>[^']*)'\); END\s*$", re.DOTALL)


@contextmanager
def rating_value_triggers_suspended(connection: Connection) -> Iterator[None]:
    """For a bulk insert of ratings into SQLite, in its write transaction: the triggers
    that check each inserted rating's values against `rubric_range` (five look-ups a
    rating, a third of a million-rating import's time in SQLite) are dropped, and on the
    way out the same conditions are judged once on the distinct value combinations the
    new ratings have, then the triggers are made again from their own stored SQL. A value
    a rubric does not allow raises IntegrityError, as the trigger would, and the
    transaction must then end: a rollback brings the triggers back, since SQLite's DDL is
    transactional (so does a killed process). The write lock is held throughout, so no
    other writer inserts without the checks. Other databases keep their triggers."""
    if connection.dialect.name != "sqlite":
        yield
        return
    triggers = []  # (name, its SQL, its condition and message)
    for name, sql in connection.exec_driver_sql(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
            "AND tbl_name = 'rating' ORDER BY name").all():
        if found := _RATING_INSERT_TRIGGER.search(sql):
            triggers.append((name, sql, found))
    last_id = connection.exec_driver_sql("SELECT coalesce(max(id), 0) FROM rating").scalar()
    for name, _, _ in triggers:
        quoted = name.replace('"', '""')
        connection.exec_driver_sql(f'DROP TRIGGER "{quoted}"')
    yield
    if triggers:
        # each trigger's own condition, judged on the distinct new values named NEW as in it
        columns = ", ".join(["rubric", *RATING_VALUE_FIELDS])
        judged = " UNION ALL ".join(f"SELECT {number} FROM NEW WHERE {found['condition']}"
                                    for number, (_, _, found) in enumerate(triggers))
        refused = connection.exec_driver_sql(
            f"WITH NEW AS MATERIALIZED (SELECT DISTINCT {columns} FROM rating WHERE id > ?) "
            f"{judged} LIMIT 1", (last_id,)).scalar()
        if refused is not None:
            message = triggers[refused][2]["message"]
            raise IntegrityError(f"(bulk insert) {message}", (), sqlite3.IntegrityError(message))
    for _, sql, _ in triggers:
        connection.exec_driver_sql(sql)
