"""Errors for bad input: every problem names the file and line it comes from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rubrics import printable

MAX_LISTED = 50


@dataclass(frozen=True)
class Problem:
    file: Path
    line: int
    message: str

    def __str__(self) -> str:
        """`file:line: message`, one line whatever the message quotes (control characters
        and line breaks shown as escapes); a problem with the whole file (line 0) has no
        line."""
        file, message = printable(str(self.file), newlines=False), printable(
            self.message, newlines=False)
        if self.line == 0:
            return f"{file}: {message}"
        return f"{file}:{self.line}: {message}"


class InputError(ValueError):
    """Raised when an input file is rejected; nothing has been written to the database.
    `note`, said after the problems, tells what the listing leaves out (the quick check
    of an import lists the problems of the values alone)."""

    def __init__(self, problems: list[Problem], note: str = "") -> None:
        self.problems = sorted(problems, key=lambda p: (str(p.file), p.line))
        self.note = note
        listed = [str(p) for p in self.problems[:MAX_LISTED]]
        if len(self.problems) > MAX_LISTED:
            listed.append(f"... and {len(self.problems) - MAX_LISTED} more problems")
        super().__init__("\n".join([*listed, *filter(None, [note])]))


class Problems:
    """Collects problems while a file is checked, so the user sees all of them at once."""

    def __init__(self, file: Path) -> None:
        self.file = file
        self.items: list[Problem] = []

    def add(self, line: int, message: str) -> None:
        self.items.append(Problem(self.file, line, message))

    def raise_if_any(self) -> None:
        if self.items:
            raise InputError(self.items)
