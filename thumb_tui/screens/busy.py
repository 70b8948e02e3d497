"""What a screen says when the database stayed locked by other processes through every
attempt (`storage.db.engine.DatabaseBusy`): nothing was written, and the same key tries again.
Where the lock's holders are known (a team's annotator keeping images locked in an open
transaction), it names them, so that the lead knows whom to ask."""

from collections.abc import Sequence


def held_by(holders: Sequence[str]) -> str:
    """Who keeps the database busy, to go after "database busy"; "" when unknown."""
    return f" ({', '.join(holders)} holds it in an open transaction)" if holders else ""


def busy(what: str = "score", holders: Sequence[str] = ()) -> str:
    return (f"database busy{held_by(holders)}, your {what} is not saved yet — press the key "
            "again")
