"""What every command group shares: the database option's state, common options, and one
way to end a command with an error."""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console
from typer.core import TyperGroup

from rubrics import printable
from storage.errors import InputError

if TYPE_CHECKING:  # SQLAlchemy and the tables load when a command opens the database
    from rich.progress import Progress, TaskID
    from sqlalchemy import Engine
    from sqlalchemy.exc import DBAPIError
    from textual.app import App

console = Console()


def progress_bar() -> Progress:
    """A transient progress bar on the commands' console; none where the console cannot
    redraw one (a pipe, a file), since there Rich would end it with an empty line."""
    from rich.progress import Progress

    return Progress(console=console, transient=True, disable=not console.is_interactive)


def named_tasks(bar: Progress) -> Callable[[str, int, int], None]:
    """`report(name, done, total)` for work in named parts (the metrics computed, an
    import's phases): a task on `bar` for each name as it first reports."""
    tasks: dict[str, TaskID] = {}

    def report(name: str, done: int, total: int) -> None:
        if name not in tasks:
            tasks[name] = bar.add_task(name, total=total)
        bar.update(tasks[name], completed=done, total=total)

    return report


@contextmanager
def working(description: str) -> Iterator[None]:
    """A pulsing `progress_bar` while work whose length is not known runs (a report, an
    export): the user sees that the command is at work, and at what."""
    with progress_bar() as bar:
        bar.add_task(description, total=None)
        yield


SQLITE_HEADER = b"SQLite format 3\x00"


def fail(message: str) -> NoReturn:
    """End the command: the message on stderr, prefixed with 'error: ', and exit status 2.
    Control characters in it (it may quote a file's content) are shown as escapes."""
    typer.echo(f"error: {printable(message)}", err=True)
    raise typer.Exit(2)


def check_format(fmt: str, formats: Sequence[str]) -> None:
    """End the command unless `fmt` is one of the command's `formats` (the same list its
    help names)."""
    if fmt not in formats:
        fail(f"--format must be one of {', '.join(formats)}, not {fmt!r}")


@contextmanager
def warnings_as_notes() -> Iterator[None]:
    """The warnings a library raises in the block (a font without a glyph, say), each
    printed once after it as a `note:` line on stderr, without the source file and line
    that Python's own display adds."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        yield
    for message in dict.fromkeys(str(warning.message) for warning in caught):
        typer.echo(f"note: {printable(message, newlines=False)}", err=True)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run a short, allocation-heavy command without Python's cyclic garbage collector:
    its full collections walk every object the imports made (pandas, SQLAlchemy), and
    while `thumb report` loads its modules and reads thousands of rows they cost it 0.3 s
    of its 1.5. Reference counting still frees everything that is not in a cycle; the
    collector is back on (if it was on) when the block ends: `collector_held` of a
    command that draws no screen."""
    from thumb_tui.startup import collector_held

    with collector_held():
        yield


INSUFFICIENT_PRIVILEGE = "42501"  # PostgreSQL: the role may not read or write a table


def reflowed(text: str) -> str:
    """A docstring's help as paragraphs that the terminal wraps: Typer's help keeps the line
    breaks of every paragraph but the first, which then break mid-sentence at any other
    width than the source's. A paragraph of list items or indented lines keeps them."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(
        paragraph if any(line[:1] in ("-", "*", " ", "\b") for line in paragraph.splitlines())
        else " ".join(paragraph.split("\n")) for paragraph in paragraphs)


def _reflow_help(group: object) -> None:
    """`reflowed` help for every command under `group`, sub-groups included."""
    for command in getattr(group, "commands", {}).values():
        if command.help:
            command.help = reflowed(command.help)
        _reflow_help(command)


@contextmanager
def _ended_by_signals() -> Iterator[None]:
    """While a command runs, SIGTERM and SIGHUP (`kill`, `timeout`, a closed terminal) end
    it as Ctrl-C does, by an exception (exit status 128 + the signal's number): its
    transaction rolls back and the outputs not yet moved into place are removed, where the
    default would end the process mid-write, leaving temporary files and a new, empty
    database behind. The handlers before it are put back after."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield  # (signal handlers belong to the main thread)
        return

    def end(number: int, _frame: object) -> None:
        raise SystemExit(128 + number)

    numbers = [getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]
    before = {number: signal.signal(number, end) for number in numbers}
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)


class SafeGroup(TyperGroup):
    """The root command group: an operating-system or database error that reaches it (a
    folder that does not exist, a full disk, a server that went away) ends the command in
    one line with exit status 2, never a traceback; so do an unusable keymap file and a
    database that other processes kept locked through every attempt."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        _reflow_help(self)

    def invoke(self, ctx: typer.Context) -> object:
        """Run the command; if it fails in any way (an error, a refusal, Ctrl-C, SIGTERM or
        SIGHUP), a database file that it created is removed again: a failed command leaves
        nothing."""
        import click

        state.forget_new_database()
        try:
            with _ended_by_signals():
                result = self._invoke(ctx)
        except BaseException as exc:
            if not (isinstance(exc, click.exceptions.Exit) and exc.exit_code == 0):
                state.remove_new_database()
            state.close_databases()
            raise
        state.close_databases()
        return result

    def _invoke(self, ctx: typer.Context) -> object:
        from sqlalchemy.exc import DBAPIError

        from storage.db.engine import DatabaseBusy

        try:
            return super().invoke(ctx)
        except typer.TyperException as exc:
            # `thumb status --db x`: the root group's option given after the command's name
            # (a usage error that names its option: Click's NoSuchOption, which Typer keeps)
            where = getattr(exc, "ctx", None)
            if getattr(exc, "option_name", None) == "--db" and where is not None:
                command = where.command_path.partition(" ")[2]
                exc.message = (f"{exc.message}: --db goes before the command's name "
                               f"(thumb --db PATH {command} …)")
            raise
        except ValueError as exc:
            # a keymap error needs the keymap loaded: commands that never load it (the
            # report, metrics) do not pay for importing Textual to recognise one
            keymap = sys.modules.get("thumb_tui.keymap")
            if keymap is None or not isinstance(exc, keymap.KeymapError):
                raise
            fail(str(exc))
        except DatabaseBusy as exc:
            fail(f"{exc}; try again")
        except BrokenPipeError:
            raise  # `thumb … | head`: Click ends quietly (status 1), the reader has enough
        except OSError as exc:
            if isinstance(exc.__cause__, DBAPIError):  # pandas' read_sql wraps the driver's
                _database_failure(exc.__cause__)       # error (its DatabaseError: an OSError)
            where = f": {exc.filename}" if exc.filename else ""
            fail(f"{exc.strerror or exc}{where}")
        except DBAPIError as exc:
            _database_failure(exc)


def _database_failure(error: DBAPIError) -> NoReturn:
    """End the command in one line for an error the database server or driver raised: its
    first line, never the SQL."""
    if getattr(error.orig, "sqlstate", None) == INSUFFICIENT_PRIVILEGE:
        fail(f"database error: {_first_line(error.orig)}: on a team database this command "
             "is a lead's (`thumb team status` lists them); `thumb next` says what waits "
             "for you")
    fail(f"database error: {_first_line(error.orig)}")


def read_only_folder_hint(database: Path) -> str:
    """Why SQLite may not open a database whose folder this process cannot write (an
    archive on read-only media, a read-only mount): to read a database in WAL mode, as
    thumb-tui leaves its files, SQLite creates a -shm file next to it."""
    if os.access(database.parent, os.W_OK):
        return ""
    return (f" (its folder {database.parent} is read-only here, and SQLite must write a "
            "-shm file next to the database to read it: copy it with cp, with its -wal file "
            "if it has one, while nobody writes it)")


def _empty_database(path: Path) -> bool:
    """A file of no bytes whose write-ahead log holds none either (a new database in WAL
    mode keeps its first pages in the -wal file until a checkpoint)."""
    wal = Path(f"{path}-wal")
    return path.stat().st_size == 0 and not (wal.is_file() and wal.stat().st_size > 0)


def _first_line(error: object) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


class State:
    db: str = "thumb.db"
    # the SQLite file this command created (None: none), and the engine opened on each --db
    _created: Path | None = None
    _engines: dict[str, Engine]

    def __init__(self) -> None:
        self._engines = {}

    @property
    def shown_db(self) -> str:
        """--db as shown to the user: a URL without its password or any other secret of
        its query (`storage.db.engine.shown_url`)."""
        from storage.db.engine import is_url, shown_url

        return shown_url(self.db) if is_url(self.db) else self.db

    @property
    def db_option(self) -> str:
        """` --db DB` for a command line we print, or nothing where the database would be
        found again without it: the default file, or THUMB_DB (a password in it stays in
        the environment, never on a printed command line)."""
        import shlex

        if self.db == "thumb.db" or os.environ.get("THUMB_DB") == self.db:
            return ""
        return f" --db {shlex.quote(self.shown_db)}"

    @property
    def engine(self) -> Engine:
        """The database, created if it does not exist yet (import), its schema brought up
        to date (SQLite) or refused (an older PostgreSQL schema: `thumb db upgrade`)."""
        return self._open(must_exist=False)

    @property
    def existing_engine(self) -> Engine:
        """The database; commands that only read or rate need it to exist already."""
        return self._open(must_exist=True)

    def require_existing(self) -> str:
        """End the command unless --db names a usable database; return it as shown to the
        user (a URL without its password)."""
        return self._check(must_exist=True)

    def _check(self, *, must_exist: bool) -> str:
        """What is wrong with --db, before connecting, as one line that ends the command."""
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        from storage.db.engine import is_url, sqlite_path

        shown = self.shown_db
        path = sqlite_path(self.db)
        if path is not None:
            if path.is_dir():
                fail(f"--db {shown} is a folder, not a database file")
            if path.exists() and not path.is_file():  # a FIFO, a device: never opened
                fail(f"--db {shown} is not a regular file (a FIFO, device or socket)")
            if not path.parent.is_dir():
                fail(f"--db {shown}: the folder {path.parent} does not exist")
            if must_exist and not path.is_file():
                fail(f"no database at {shown}; create one with `thumb --db {shown} "
                     "import FILE`")
            if must_exist and _empty_database(path):  # truncated by a full disk, `touch`
                fail(f"--db {shown} is an empty file, not a thumb-tui database (if it was "
                     f"one, restore it from a backup); start a project with `thumb --db "
                     f"{shown} import FILE`")
            if path.is_file() and not _sqlite_file(path):
                fail(f"--db {shown} is not a thumb-tui database (not a SQLite file)")
            if not is_url(self.db):
                return shown
        try:
            make_url(self.db)
        except ArgumentError:
            fail(f"--db {shown!r} is not a database URL")
        return shown

    def _open(self, *, must_exist: bool) -> Engine:
        """Open --db, or end the command in one line saying what is wrong with it. Once
        per command: later calls get the same engine, never a second look at the file
        (`_sqlite_file`) while this process has it open."""
        from sqlalchemy.exc import SQLAlchemyError

        from storage.db.engine import sqlite_path
        from storage.db.migrations import SchemaError
        from storage.db.opening import open_database

        opened = self._engines.get(self.db)
        if opened is not None:
            return opened
        shown = self._check(must_exist=must_exist)
        self._claim_new_file()
        try:
            engine = open_database(self.db, on_upgrade=lambda upgrade: typer.echo(
                f"note: {upgrade}", err=True))
            self._engines[self.db] = engine
            return engine
        except SchemaError as exc:
            fail(str(exc))
        except (SQLAlchemyError, ImportError, RuntimeError) as exc:
            reason = _first_line(getattr(exc, "orig", None) or exc)
            path = sqlite_path(self.db)
            hint = "" if path is None else read_only_folder_hint(path)
            fail(f"cannot open the database {shown}: {reason}{hint}")

    def _claim_new_file(self) -> None:
        """Create a new SQLite file empty (O_EXCL: of two processes, one creates it), so
        that this command knows the file is its own and removes it if it fails."""
        from storage.db.engine import sqlite_path

        path = sqlite_path(self.db)
        if path is None or self._created is not None:
            return
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            return
        self._created = path

    def forget_new_database(self) -> None:
        """A new command begins: nothing created yet."""
        self._created, self._engines = None, {}

    def close_databases(self) -> None:
        """The command ended: close its engines, so that SQLite folds the write-ahead log
        into the database file now (not whenever the engine happens to be collected: a
        copy of the file made later would lack what the log still held)."""
        for engine in self._engines.values():
            engine.dispose()
        self._engines = {}

    def remove_new_database(self) -> None:
        """The command failed: remove the database file it created (with its -wal, -shm and
        -journal files), unless another process has written to it meanwhile (its event
        log is not empty: the failed command's own writes were rolled back)."""
        path, self._created = self._created, None
        for engine in self._engines.values():
            engine.dispose()
        self._engines = {}
        if path is None or not path.exists() or _written_to(path):
            return
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def _written_to(path: Path) -> bool:
    """Whether the SQLite file holds any event (a change some command committed)."""
    import sqlite3

    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        return connection.execute("SELECT 1 FROM event_log LIMIT 1").fetchone() is not None
    except sqlite3.Error:  # no such table: an empty or half-made database
        return False
    finally:
        connection.close()


def _sqlite_file(path: Path) -> bool:
    """An empty file (SQLite makes it a database) or one with SQLite's header. Only before
    this process opens the file: closing any descriptor of a file drops all of the
    process's POSIX locks on it, SQLite's included, and without its shared lock another
    process that closes the database deletes the write-ahead log still in use here."""
    with path.open("rb") as handle:
        header = handle.read(len(SQLITE_HEADER))
    return header in (b"", SQLITE_HEADER)


state = State()


def _check_ci(value: float) -> float:
    if not 0 < value < 1:
        raise typer.BadParameter("must be between 0 and 1 (0.90 for 90%)")
    return value


ActorOption = Annotated[
    str, typer.Option("--by", help="Who makes the change (recorded in the event log).")
]
CiOption = Annotated[float, typer.Option("--ci", callback=_check_ci,
                                         help="Confidence level of the bootstrap CIs.")]


# Fewer resamples leave a 90% interval's tails a handful of draws (5 in each at 100): an
# "interval" and a significance verdict from 1 or 20 draws would mean nothing.
MIN_RESAMPLES = 100


def _resamples(count: int) -> int:
    if 0 < count < MIN_RESAMPLES:
        raise typer.BadParameter(
            f"{count} resamples are too few for a confidence interval (its tails would hold "
            f"a draw or two): give at least {MIN_RESAMPLES} (1000 or more for figures you "
            "publish), or 0 for no intervals")
    return count


def bootstrap_option(unit: str) -> object:
    """The --bootstrap option of a command whose CIs resample `unit`: one option, its help
    naming what is drawn (an analysis of ratings draws images, a retrieval evaluation
    queries); 0, or at least MIN_RESAMPLES."""
    return Annotated[int, typer.Option(
        "--bootstrap", min=0, callback=_resamples,
        help=f"Bootstrap resamples of {unit} (0: no confidence intervals; else at least "
             f"{MIN_RESAMPLES}).")]


BootstrapOption = bootstrap_option("images")  # the rating and judgment analyses' unit
QueriesBootstrapOption = bootstrap_option("queries")  # retrieval evaluation
ItemsBootstrapOption = bootstrap_option("items")  # BISON
PairsBootstrapOption = bootstrap_option("verified pairs")  # match verifiers' agreement
SeedOption = Annotated[int, typer.Option("--seed")]
ImageModeOption = Annotated[
    str, typer.Option("--image-mode", help="auto, tgp, sixel, halfcell, unicode or none.")
]
NativeOption = Annotated[
    bool | None, typer.Option("--native/--non-native", help="Are you a native English speaker?")
]
AnnotatorOption = Annotated[str | None, typer.Option(
    "--annotator", help="Your annotator name (required, except on a PostgreSQL team "
                        "database, where it is your login role).")]
AllowDownloadOption = Annotated[bool, typer.Option(
    "--allow-download",
    help="Let models be fetched from the Hugging Face hub. By default only local files are "
         "used (a model folder or the local cache), so that a machine without internet "
         "fails at once instead of retrying for minutes.")]


def model_hub(allow_download: bool) -> None:
    """Local-only model loading unless the user allows the hub (HF_HUB_OFFLINE and
    TRANSFORMERS_OFFLINE, read when transformers and huggingface_hub are first imported,
    which the commands do only after this)."""
    if not allow_download:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"


OutsideImagesOption = Annotated[bool, typer.Option(
    "--allow-outside-images",
    help="Accept image paths that lead outside the images folder (absolute paths, .., "
         "symlinks); refused by default, since the file comes from someone else.")]


@contextmanager
def protocol_refusals() -> Iterator[None]:
    """What the THUMB protocol refuses ends the command with its reason, not a traceback."""
    from storage.rating.protocol import ProtocolError

    try:
        yield
    except ProtocolError as exc:
        fail(str(exc))


@contextmanager
def value_errors() -> Iterator[None]:
    """A ValueError or RuntimeError raised for the user's input ends the command with it."""
    try:
        yield
    except typer.Exit:  # a RuntimeError too: a command that already ended with fail()
        raise
    except (ValueError, RuntimeError) as exc:
        fail(str(exc))


def run_app(app: App) -> None:
    """Run a Textual app; end the command with the app's non-zero exit status when it
    stopped on an unhandled error (Textual has printed the traceback), in one line where
    there is no terminal to run it in."""
    from thumb_tui.app import NoTerminal

    try:
        app.run()
    except NoTerminal as exc:
        fail(str(exc))
    if app.return_code:
        raise typer.Exit(app.return_code)


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
    engine = state.engine
    try:
        yield engine
    except InputError as exc:
        state.remove_new_database()
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
    """The name given, stripped, under the rule for every name (`rubrics.escape.
    name_refusal`: one line, without the characters an import refuses), so that the
    project's export of their work can be imported."""
    from rubrics.escape import name_refusal

    name = annotator.strip()
    if not name:
        fail("--annotator needs a name")
    if (problem := name_refusal(name)) is not None:
        fail(f"the annotator name: {problem}")
    return name


KNOWN_LISTED = 20  # names an unknown-annotator refusal lists at most


def known_annotator(annotator: str | None) -> str:
    """The --annotator name, which must be an annotator of the project (made by `thumb
    annotator NAME`, an import or earlier work): a typo would otherwise start a second
    annotator whose ratings are split from the real one's; on a PostgreSQL team database
    an annotator's login role, which is also the name when none is given. Ends the
    command with the closest known name and how to create a new one."""
    import difflib
    import shlex

    from storage.rating.annotators import annotator_names
    from storage.team import session_annotator

    role = session_annotator(state.existing_engine)
    if annotator is None:
        if role is None:
            fail("--annotator is required: your annotator name (only an annotator's login "
                 "role on a PostgreSQL team database names them without it)")
        return role
    name = annotator_name(annotator)
    if role is not None and name != role:
        shown_role = printable(role, newlines=False)
        fail(f"you are logged in to the database as the annotator '{shown_role}': on this "
             f"team database your annotator name is your role (--annotator {shown_role})")
    known = annotator_names(state.existing_engine)
    if name in known:
        return name
    shown = printable(name, newlines=False)
    database = state.db_option
    close = difflib.get_close_matches(name, known, n=1)
    listed = ", ".join(printable(other, newlines=False) for other in known[:KNOWN_LISTED])
    if len(known) > KNOWN_LISTED:
        listed += f", … ({len(known)} in all)"
    fail(f"no annotator '{shown}' in this project"
         + (f"; did you mean '{printable(close[0], newlines=False)}'?" if close else ".")
         + (f" Known: {listed}." if known else " It has no annotators yet.")
         + f" Create a new one with `thumb{database} annotator {shlex.quote(shown)}`.")
