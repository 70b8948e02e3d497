"""What every command group shares: the database option's state, common options, and one
way to end a command with an error."""

from __future__ import annotations

import getpass
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from sqlalchemy import Engine

from storage import InputError, open_database

console = Console()


def fail(message: str) -> NoReturn:
    """End the command: the message on stderr, prefixed with 'error: ', and exit status 2."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


class State:
    db: str = "thumb.db"

    @property
    def engine(self) -> Engine:
        """The database, its schema brought up to date (SQLite) or refused (an older
        PostgreSQL schema: `thumb db upgrade`); commands that only read or rate need it to
        exist already."""
        from storage.migrations import SchemaError

        try:
            return open_database(self.db, on_upgrade=lambda upgrade: typer.echo(
                f"note: {upgrade}", err=True))
        except SchemaError as exc:
            fail(str(exc))

    def require_existing(self) -> None:
        if "://" not in self.db and not Path(self.db).expanduser().is_file():
            fail(f"no database at {self.db}; create one with `thumb --db {self.db} import "
                 "FILE`")

    @property
    def existing_engine(self) -> Engine:
        self.require_existing()
        return self.engine


state = State()


def default_actor() -> str:
    try:
        return getpass.getuser()
    except OSError:
        return "unknown"


def _check_ci(value: float) -> float:
    if not 0 < value < 1:
        raise typer.BadParameter("must be between 0 and 1 (0.90 for 90%)")
    return value


ActorOption = Annotated[
    str, typer.Option("--by", help="Who makes the change (recorded in the event log).")
]
CiOption = Annotated[float, typer.Option("--ci", callback=_check_ci,
                                         help="Confidence level of the bootstrap CIs.")]
BootstrapOption = Annotated[int, typer.Option("--bootstrap", min=0,
                                              help="Bootstrap resamples of images.")]
SeedOption = Annotated[int, typer.Option("--seed")]
ImageModeOption = Annotated[
    str, typer.Option("--image-mode", help="auto, tgp, sixel, halfcell, unicode or none.")
]
NativeOption = Annotated[
    bool | None, typer.Option("--native/--non-native", help="Are you a native English speaker?")
]
AnnotatorOption = Annotated[str, typer.Option("--annotator", help="Your annotator name.")]


@contextmanager
def protocol_refusals() -> Iterator[None]:
    """What the THUMB protocol refuses ends the command with its reason, not a traceback."""
    from storage.workflow import ProtocolError

    try:
        yield
    except ProtocolError as exc:
        fail(str(exc))


@contextmanager
def value_errors() -> Iterator[None]:
    """A ValueError or RuntimeError raised for the user's input ends the command with it."""
    try:
        yield
    except (ValueError, RuntimeError) as exc:
        fail(str(exc))


def stop_if_empty(queue: object, message: str) -> None:
    """Say why there is nothing to do and end, instead of opening an empty screen."""
    if not queue:
        typer.echo(message)
        raise typer.Exit(0)


@contextmanager
def database_for_import() -> Iterator[Engine]:
    """The database to import into, created if need be. A SQLite file that this import
    created is removed again when the input is rejected: a failed import leaves nothing.
    A rejected input ends the command with every problem found."""
    path = None if "://" in state.db else Path(state.db).expanduser()
    existed = path is None or path.exists()
    engine = state.engine
    try:
        yield engine
    except InputError as exc:
        if path is not None and not existed:
            engine.dispose()
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        fail(f"input rejected; the database is unchanged.\n{exc}")


def image_mode(mode: str) -> str:
    """Validate --image-mode and probe the terminal before Textual takes it over."""
    from thumb_tui.widgets.image_view import IMAGE_MODES, image_backend

    if mode not in IMAGE_MODES:
        fail(f"--image-mode must be one of {', '.join(IMAGE_MODES)}")
    if mode != "none" and image_backend() is None:
        typer.echo("warning: this terminal could not be probed for images; showing none",
                   err=True)
        return "none"
    return mode


def annotator_name(annotator: str) -> str:
    if not annotator.strip():
        fail("--annotator needs a name")
    return annotator.strip()


def write_or_echo(text: str, out: Path | None, what: str) -> None:
    """Print the text, or write it to --out and say what was written."""
    if out is None:
        typer.echo(text)
        return
    out.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {what} to {out}")
