"""What a screen says when the database stayed locked by other processes through every
attempt (`storage.db.DatabaseBusy`): nothing was written, and the same key tries again."""


def busy(what: str = "score") -> str:
    return f"database busy, your {what} is not saved yet — press the key again"
