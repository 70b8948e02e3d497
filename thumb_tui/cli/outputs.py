"""Every file a command writes goes through here. An output is checked before any work (its
folder exists; it is not a folder, not a symbolic link, and not an existing file unless
`--force`; its suffix does not name another format than the one asked for), written to a
temporary file beside it, and moved into place only when the command succeeds: a command
that fails or is interrupted leaves no partial output and destroys nothing.

- A symbolic link at an output path, or among the folders the path names (`sub` in
  `--out sub/x.csv`), is refused even with `--force`: the link's target is someone's file
  or folder, which a write through the link would replace or fill.
- A file is never renamed: `--format csv --out foo.txt` writes CSV to foo.txt. A suffix
  that names another format (`--format csv --out foo.parquet`) is refused.
- Moving into place: without `--force` a hard link, which fails if the name was taken in
  the meantime (then the temporary file is renamed where hard links are not supported);
  with `--force` `os.replace`, which replaces a directory entry and never writes through a
  link, keeping the permission bits of the file it replaces.
- A folder output (the report, an eccv-json positive set) is written into a temporary
  folder; a new folder is renamed into place whole, an existing one receives each file
  after all of them were checked.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from rubrics import printable
from thumb_tui.cli.common import fail

ForceOption = Annotated[bool, typer.Option(
    "--force", help="Replace output files that exist (never through a symbolic link: a "
                    "link is refused even with --force).")]
RawOption = Annotated[bool, typer.Option(
    "--raw", help="CSV: write text cells as they are. By default a cell that begins with "
                  "=, +, -, @, a tab or a carriage return gets a leading ' so that a "
                  "spreadsheet shows it as text, never as a formula (thumb import removes "
                  "that ' again).")]

# The formats a suffix names; an output whose suffix is here must be asked for in one of
# them. Other suffixes (.txt, none) take any format.
SUFFIX_FORMATS = {
    ".csv": ("csv",), ".parquet": ("parquet",), ".md": ("md",), ".markdown": ("md",),
    ".html": ("html",), ".htm": ("html",), ".json": ("json", "jsonl", "thumb-jsonl"),
    ".jsonl": ("jsonl", "thumb-jsonl"), ".ndjson": ("jsonl", "thumb-jsonl"),
    ".tex": ("latex",),
}


def _linked_folder(path: Path) -> Path | None:
    """The outermost folder named in `path`, as it was given, that is a symbolic link
    (`sub` in `sub/x.csv`), or None. Every folder of an absolute path counts (on macOS,
    give /private/tmp for /tmp); the working directory's own path is not looked at."""
    return next((folder for folder in reversed(path.parents) if folder.is_symlink()), None)


def _symlink(path: Path, option: str, instead: str = "choose another name") -> None:
    """Refuse an output that is a symbolic link or lies in a folder reached through one:
    a link planted as the output, or as a folder on its way (`--out sub/x.csv` with `sub`
    a link to someone's folder), would send the write to a file that is not the one
    named. Refused even with --force; the one check of every file and folder written."""
    if path.is_symlink():
        fail(f"{option} {path} is a symbolic link; thumb never writes through one, even "
              f"with --force (remove the link or {instead})")
    folder = _linked_folder(path)
    if folder is not None:
        fail(f"{option} {path}: the folder {folder} is a symbolic link (to "
              f"{os.readlink(folder)}); thumb never writes through one, even with --force "
              "(name the folder it leads to, if that is where the output belongs)")


def _exists(path: Path, option: str, shown: Path | None = None) -> None:
    where = f"{option} {shown}: {path}" if shown is not None else f"{option} {path}"
    fail(f"{where} exists; add --force to replace it")


def check_suffix(path: Path, fmt: str, option: str = "--out") -> None:
    """Refuse an output name whose suffix names another format than `fmt`."""
    formats = SUFFIX_FORMATS.get(path.suffix.lower())
    if formats is not None and fmt not in formats:
        wanted = next((s for s, f in SUFFIX_FORMATS.items() if fmt in f), ".txt")
        fail(f"{option} {path} is a {path.suffix} name but --format is {fmt}: name it "
              f"{wanted}, or ask for --format {formats[0]}")


def output_file(path: Path | None, option: str = "--out", *, force: bool = False,
                fmt: str | None = None, may_exist: bool = False) -> None:
    """Refuse, before any work, an output file that cannot be written where it is asked: a
    missing folder, a folder, a symbolic link, an existing file (unless `force` or
    `may_exist`), a suffix that names another format than `fmt`."""
    if path is None:
        return
    _symlink(path, option)
    if path.is_dir():
        fail(f"{option} {path} is a folder; give a file name")
    if not path.parent.is_dir():
        fail(f"{option} {path}: the folder {path.parent} does not exist")
    if fmt is not None:
        check_suffix(path, fmt, option)
    if path.exists() and not (force or may_exist):
        _exists(path, option)


def output_folder(path: Path, option: str = "--out", *, force: bool = False,
                  expect: Iterable[str] = ()) -> None:
    """Refuse, before any work, an output folder that is a file or whose parent folder does
    not exist (the folder itself is made), and any of the files `expect` names in it that
    is a symbolic link or (without `force`) exists. A folder that is a symbolic link is
    refused (even with `force`): a link planted as a report folder, or as its `tables/`,
    would send the files somewhere else."""
    _symlink(path, option, "choose another folder")
    if path.exists() and not path.is_dir():
        fail(f"{option} {path} is a file, not a folder")
    if not path.exists():
        existing = next((p for p in path.parents if p.exists()), None)
        if existing is not None and not existing.is_dir():
            fail(f"{option} {path}: {existing} is a file, not a folder")
        if not path.parent.is_dir():
            fail(f"{option} {path}: the folder {path.parent} does not exist")
    for name in expect:
        inside = path / name
        if inside.is_symlink():
            fail(f"{option} {path}: {inside} is a symbolic link; thumb never writes "
                  "through one, even with --force (remove the link)")
        if inside.exists() and not force:
            _exists(inside, option, path)


def _temporary_name(target: Path) -> Path:
    return target.parent / (f".{target.name[:80]}.{secrets.token_hex(4)}.tmp"
                            f"{target.suffix[:16]}")


@dataclass
class _File:
    temporary: Path
    target: Path
    option: str
    optional: bool
    may_exist: bool


@dataclass
class _Folder:
    staging: Path
    target: Path
    option: str


class Outputs:
    """The files one command writes. `file()` and `folder()` check an output and give the
    temporary path to write instead; leaving the `with` block normally moves them all into
    place (after checking all of them again), leaving it by an exception removes them."""

    def __init__(self, force: bool = False) -> None:
        self.force = force
        self._files: list[_File] = []
        self._folders: list[_Folder] = []

    def __enter__(self) -> Outputs:
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        import click

        if kind is None or (isinstance(error, click.exceptions.Exit)
                            and error.exit_code == 0):
            self.commit()
        else:
            self.discard()
        return False

    def file(self, target: Path, option: str = "--out", *, fmt: str | None = None,
             optional: bool = False, may_exist: bool = False) -> Path:
        """The temporary file to write instead of `target`, created empty (O_EXCL) beside
        it with the same suffix. An `optional` file is moved into place only if something
        was written to it, and only then checked for an existing file; `may_exist` leaves
        the decision to replace an existing file to the caller."""
        output_file(target, option, force=self.force, fmt=fmt,
                    may_exist=optional or may_exist)
        temporary = _temporary_name(target)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        os.close(os.open(temporary, flags, 0o666))
        self._files.append(_File(temporary, target, option, optional, may_exist))
        return temporary

    def folder(self, target: Path, option: str = "--out", *, expect: Iterable[str] = ()
               ) -> Path:
        """The temporary folder to write instead of `target`: inside `target` when it
        exists, else beside it."""
        output_folder(target, option, force=self.force, expect=expect)
        where = target if target.is_dir() else target.parent
        staging = where / f".{target.name[:80]}.{secrets.token_hex(4)}.tmp"
        staging.mkdir(0o777)
        self._folders.append(_Folder(staging, target, option))
        return staging

    def drop(self, temporary: Path) -> None:
        """Do not write this file after all (its temporary file is removed)."""
        for item in [f for f in self._files if f.temporary == temporary]:
            self._files.remove(item)
            item.temporary.unlink(missing_ok=True)

    def discard(self) -> None:
        """Remove every temporary file and folder; nothing is moved into place."""
        for item in self._files:
            item.temporary.unlink(missing_ok=True)
        for folder in self._folders:
            _remove_tree(folder.staging)
        self._files, self._folders = [], []

    def commit(self) -> None:
        """Check every output again, then move each into place; a refusal moves none."""
        moves: list[tuple[Path, Path, bool, str]] = []  # (from, to, may replace, option)
        renames: list[_Folder] = []
        for item in self._files:
            if item.optional and item.temporary.stat().st_size == 0:
                item.temporary.unlink(missing_ok=True)
                continue
            moves.append((item.temporary, item.target, self.force or item.may_exist,
                          item.option))
        for folder in self._folders:
            if not os.path.lexists(folder.target) and folder.staging.parent != folder.target:
                renames.append(folder)
                continue
            for inside in sorted(folder.staging.iterdir()):
                moves.append((inside, folder.target / inside.name, self.force, folder.option))
        try:
            for folder in self._folders:  # (made a link since it was checked)
                output_folder(folder.target, folder.option, force=True)
            for _, target, replace, option in moves:
                _symlink(target, option)
                if target.is_dir():
                    fail(f"{option} {target} is a folder; give a file name")
                if target.exists() and not replace:
                    _exists(target, option)
            for folder in renames:
                _move_folder(folder)
            for source, target, replace, option in moves:
                _move(source, target, replace, option)
        except BaseException:
            self.discard()
            raise
        for folder in self._folders:
            if folder.staging.exists():
                _remove_tree(folder.staging)
        self._files, self._folders = [], []


def _move(source: Path, target: Path, replace: bool, option: str = "--out") -> None:
    if replace:
        try:
            mode = stat.S_IMODE(os.lstat(target).st_mode)
        except FileNotFoundError:
            pass
        else:
            os.chmod(source, mode)
        os.replace(source, target)  # replaces the entry: a link is replaced, not followed
        return
    try:
        os.link(source, target)  # fails if the name was taken since it was checked
    except FileExistsError:
        _exists(target, option)
    except OSError:  # a file system without hard links
        if os.path.lexists(target):
            _exists(target, option)
        os.replace(source, target)
        return
    source.unlink()


def _move_folder(folder: _Folder) -> None:
    """A new output folder: the temporary one renamed into place whole; if another process
    made the folder in the meantime, its files one by one (none may exist)."""
    try:
        os.rename(folder.staging, folder.target)
    except OSError:
        folder.target.mkdir(exist_ok=True)
        for inside in sorted(folder.staging.iterdir()):
            _move(inside, folder.target / inside.name, False, folder.option)


def _remove_tree(folder: Path) -> None:
    if not folder.is_dir() or folder.is_symlink():
        return
    for inside in folder.iterdir():
        if inside.is_dir() and not inside.is_symlink():
            _remove_tree(inside)
        else:
            inside.unlink(missing_ok=True)
    folder.rmdir()


@contextmanager
def written(target: Path | None, *, force: bool = False, option: str = "--out",
            fmt: str | None = None) -> Iterator[Path | None]:
    """One output file: the temporary path to write instead of `target`, moved into place
    when the block ends normally; None when `target` is None (the output is stdout)."""
    if target is None:
        yield None
        return
    with Outputs(force) as files:
        yield files.file(target, option, fmt=fmt)


def write_or_echo(text: str, out: Path | None, what: str, *, force: bool = False) -> None:
    """Print the text, or write it to --out (atomically; an existing file only with
    `force`, never through a symbolic link) and say what was written."""
    if out is None:
        typer.echo(printable(text))
        return
    with written(out, force=force) as path:
        assert path is not None
        path.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {what} to {out}")
