"""The event log's one writer. Every change is logged with who made it: the name the user
gave (annotator or `--by`), the OS login of the process and, on PostgreSQL, the database
role, which a trigger sets from the server's `session_user` so no client can forge it."""

from __future__ import annotations

import getpass
import json
import uuid
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy import Connection


@cache
def os_login() -> str:
    """The login name of the user running this process."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "unknown"


def log_change(connection: Connection, *, actor: str, action: str, table: str,
               new: Mapping[str, object], old: Mapping[str, object] | None = None,
               row_id: int | None = None, change_id: str | None = None,
               reverts: str | None = None) -> str:
    """Append one event per field of `new` (values as JSON; the old value where `old` has
    the field) inside the caller's transaction; they share one change id, returned."""
    # the tables load with the first change, not with `os_login`, which every command line
    # module imports to name who acts
    from storage.models import Event, utcnow

    change_id = change_id or uuid.uuid4().hex
    now, old = utcnow(), old or {}
    connection.execute(Event.__table__.insert(), [
        {"at": now, "actor": actor, "action": action, "table_name": table, "row_id": row_id,
         "field_name": field, "old_value": json.dumps(old[field]) if field in old else None,
         "new_value": json.dumps(value), "change_id": change_id, "reverts": reverts,
         "os_login": os_login()}
        for field, value in new.items()
    ])
    return change_id
