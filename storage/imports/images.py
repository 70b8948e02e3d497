"""Image files named by an imported file are untrusted: a path must stay inside the images
folder (no `..`, absolute path or symlink leading out, unless the user allows it), and the
file must be an image Pillow decodes, in a known format, under the decompression-bomb
limit. The screens use the same check, so a file broken after import shows a reason
instead of crashing them."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import stat
import subprocess
import sys
import threading
import warnings
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from rubrics import printable

FORMATS = ("PNG", "JPEG", "GIF", "WEBP", "BMP", "TIFF")
MAX_PIXELS = 89_478_485  # Pillow's own decompression-bomb threshold (0.25 GiB of RGBA)
OUTSIDE_HINT = ("if you trust this file (a thumb export written in another folder is one), "
                "add --allow-outside-images")


class ImagePathError(ValueError):
    """An image path that cannot be used; the message says why."""


class ImageNotFound(ImagePathError):
    """No file at an image path (which some formats then read as an image key)."""


def resolve_image(folder: Path, name: str, *, allow_outside: bool = False) -> Path:
    """The file `name` (relative to `folder`) names, resolved; it must exist and, unless
    `allow_outside`, lie inside `folder` once every `..` and symlink is followed."""
    if "\0" in name:
        raise ImagePathError("image path contains a NUL character")
    if os.path.isabs(name) and not allow_outside:
        raise ImagePathError(f"image path {printable(name)!r} is absolute; paths are relative "
                             f"to {printable(str(folder))} ({OUTSIDE_HINT})")
    try:
        root = folder.resolve()
        path = (root / name).resolve()
        exists = path.is_file()
    except (OSError, RuntimeError) as exc:  # a name too long for the OS, a symlink loop
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ImagePathError(f"image path {printable(name[:80])!r} cannot be used: "
                             f"{reason}") from None
    if not allow_outside and not path.is_relative_to(root):
        raise ImagePathError(f"image path {printable(name)!r} leads outside "
                             f"{printable(str(root))} (through .. or a symlink; "
                             f"{OUTSIDE_HINT})")
    if not exists:
        raise ImageNotFound(f"image file not found: {printable(name)}")
    return path


class ImageFolder:
    """`resolve_image` for the many paths of one import: each directory is resolved once,
    then a path needs one `lstat` of its file. Anything unusual (a symlinked or missing
    file, `..`, an absolute path) takes `resolve_image`'s full way and its messages."""

    def __init__(self, folder: Path, *, allow_outside: bool = False) -> None:
        self.folder, self.allow_outside = folder, allow_outside
        self._directories: dict[str, str | None] = {}  # None: leads outside or fails

    def _directory(self, name: str) -> str | None:
        try:
            root = self.folder.resolve()
            directory = (root / name).resolve()
        except (OSError, RuntimeError):
            return None
        inside = self.allow_outside or directory.is_relative_to(root)
        return str(directory) if inside else None

    def resolve(self, name: str) -> str:
        """The resolved path of the file `name` names, as text (a million rows: no Path
        objects); ImagePathError as `resolve_image` raises it."""
        head, tail = os.path.split(name)
        if tail in ("", ".", "..") or "\0" in name or os.path.isabs(name):
            return str(resolve_image(self.folder, name, allow_outside=self.allow_outside))
        if head not in self._directories:
            self._directories[head] = self._directory(head)
        directory = self._directories[head]
        try:
            mode = os.lstat(os.path.join(directory, tail)).st_mode if directory else 0
        except (OSError, ValueError):
            mode = 0
        if not stat.S_ISREG(mode):  # not a plain file (a symlink, missing, or unusual)
            return str(resolve_image(self.folder, name, allow_outside=self.allow_outside))
        return os.path.join(directory, tail)  # type: ignore[arg-type]


def image_problem(path: str | Path) -> str | None:
    """Why the file at `path` is no usable image, or None when it is one. Cached per file
    size and modification time, so the screens can ask on every redraw."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return "image file not found"
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return f"cannot read the file: {reason}"
    if not stat.S_ISREG(found.st_mode):  # a FIFO would block Pillow's open() for ever
        return "not a regular file (a folder, FIFO, device or socket)"
    return _problem(os.fspath(path), found.st_size, found.st_mtime_ns)


@lru_cache(maxsize=4096)
def _problem(path: str, size: int, _mtime: int) -> str | None:
    from PIL import Image

    if size == 0:
        return "empty file (0 bytes)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            with Image.open(path) as image:
                if image.format not in FORMATS:
                    return f"{image.format} is not an accepted format ({', '.join(FORMATS)})"
                pixels = image.width * image.height
                if pixels > MAX_PIXELS:
                    return (f"{image.width}×{image.height} pixels, over the limit of "
                            f"{MAX_PIXELS:,} (a decompression bomb?)")
                image.draft("RGB", (512, 512))  # JPEG decodes at reduced size: fast
                image.load()
        except Image.DecompressionBombError as exc:  # over twice the limit: Pillow says so
            return f"a decompression bomb? {printable(str(exc), newlines=False)[:200]}"
        except Image.UnidentifiedImageError:
            return "not an image (Pillow cannot identify the format)"
        # A truncated or corrupt file can fail in any of Pillow's decoders, with any error.
        except Exception as exc:
            return f"cannot be decoded: {printable(str(exc), newlines=False)[:200]}"
    return None


def broken_reason(path: str | None) -> str:
    """Why an annotator flags this image as broken: what the check finds, else their word."""
    if path is None:
        return "no image file"
    return image_problem(path) or "the annotator sees no usable image"


Verdict = tuple[str | None, str | None]  # (the image file, None) or (None, why it is none)


def checked_image(folder: ImageFolder, name: str) -> Verdict:
    """The file that image `name` names in `folder`, checked: (its path, None) when it is a
    usable image, else (None, why not, naming it), as an import reports it at the row."""
    try:
        path = folder.resolve(name)
    except ImagePathError as exc:
        return None, str(exc)
    problem = image_problem(path)
    return (path, None) if problem is None else (None, f"image {name!r}: {problem}")


@lru_cache(maxsize=8)
def _image_folder(folder: Path, allow_outside: bool) -> ImageFolder:
    return ImageFolder(folder, allow_outside=allow_outside)


def checked_images(folder: Path, allow_outside: bool, names: Sequence[str]) -> list[Verdict]:
    """`checked_image` of each of `names`: a worker process's task (see ImageChecker)."""
    images = _image_folder(folder, allow_outside)
    return [checked_image(images, name) for name in names]


def spare_cpus() -> int:
    """The CPUs this process may run on, less the one it runs on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) - 1
    return (os.cpu_count() or 1) - 1


def serve_image_checks() -> None:
    """A worker process of ImageChecker: a task a line on stdin, [folder, allow_outside,
    names] in JSON, and a line of its verdicts on stdout, until stdin closes. JSON, not
    pickle: the names come from an untrusted file, and reading must not run anything."""
    for line in sys.stdin.buffer:
        folder, allow_outside, names = json.loads(line)
        sys.stdout.buffer.write(json.dumps(
            checked_images(Path(folder), allow_outside, names)).encode("ascii") + b"\n")
        sys.stdout.buffer.flush()


def start_worker(module: str, function: str) -> subprocess.Popen[bytes]:
    """A worker process that runs `module.function()` and talks over pipes (its stdin and
    stdout; its stderr discarded): a fresh interpreter with this one's `sys.path`. Not
    multiprocessing's spawn, which would run the importing program's own script again in
    it (every top-level line of a script without a __main__ guard), nor a fork, which
    would copy the importing process. OSError (or ValueError) if it cannot start."""
    program = ("import json, sys; sys.path[:0] = json.loads(sys.argv[1]); "
               f"from {module} import {function}; {function}()")
    return subprocess.Popen(
        [sys.executable, "-c", program, json.dumps(sys.path)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


class _Worker:
    """One worker process of ImageChecker and the thread that reads its verdicts as they
    come (so that neither process ever waits on a full pipe); its tasks are answered in
    the order they were sent, and a worker that fails answers None to every task left."""

    def __init__(self) -> None:
        self.process = start_worker("storage.imports.images", "serve_image_checks")
        self.answers: queue.SimpleQueue[list[Verdict] | None] = queue.SimpleQueue()
        self._reader = threading.Thread(target=self._read, name="thumb-image-verdicts",
                                        daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for line in self.process.stdout:  # type: ignore[union-attr]
                self.answers.put([tuple(verdict) for verdict in json.loads(line)])
        except (OSError, ValueError):  # a broken pipe or answer: as if it ended there
            pass
        self.answers.put(None)  # every task not answered yet

    def send(self, task: tuple[Path, bool, list[str]]) -> bool:
        folder, allow_outside, names = task
        try:
            self.process.stdin.write(json.dumps(  # type: ignore[union-attr]
                [str(folder), allow_outside, names]).encode("ascii") + b"\n")
            self.process.stdin.flush()  # type: ignore[union-attr]
            return True
        except (OSError, ValueError):  # the worker is gone
            return False

    def answer(self) -> list[Verdict] | None:
        """The next task's verdicts, waiting for them (None for good once it failed)."""
        answer = self.answers.get()
        if answer is None:
            self.answers.put(None)
        return answer

    def close(self) -> None:
        """Let the worker finish its task and end (ended by force after 10 s)."""
        with contextlib.suppress(OSError):
            self.process.stdin.close()  # type: ignore[union-attr]
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join()  # it has read to the end of what the worker wrote
        self.process.stdout.close()  # type: ignore[union-attr]


class ImageChecker:
    """The image files of a large import checked in worker processes, a batch at a time,
    ahead of the rows that name them: opening, reading and decoding a file took about a
    third of an import's checks in its one process (threads are no faster: the GIL), and
    the workers run them on the other CPUs. A verdict is `checked_image`'s, made elsewhere;
    should a worker fail, the images it had are checked in this process."""

    BATCH = 256  # names a task checks: a task's round trip costs far less than its work

    def __init__(self, folder: ImageFolder, workers: int) -> None:
        """Start `workers` processes; OSError if one cannot start (none is left running)."""
        self.folder = folder
        self._workers: list[_Worker] = []
        try:
            for _ in range(workers):
                self._workers.append(_Worker())
        except (OSError, ValueError) as exc:  # no interpreter to start (an embedded Python)
            self.close()
            raise OSError(f"image workers cannot start: {exc}") from exc
        self._batch: list[str] = []  # the names of task number `_filling`
        self._filling = 0
        self._place: dict[str, tuple[int, int]] = {}  # name -> (its task, its index there)
        self._answered = 0  # the tasks whose answers have been read
        self._answers: dict[int, list[Verdict] | None] = {}  # read, not all taken
        self._left: dict[int, int] = {}  # a task's verdicts not yet taken
        self._sent: dict[int, bool] = {}
        self.checked_elsewhere = 0

    def __contains__(self, name: str) -> bool:
        return name in self._place

    def ahead(self, name: str) -> None:
        """Have `name` checked in a worker, with the next names (a batch at a time)."""
        self._place[name] = (self._filling, len(self._batch))
        self._batch.append(name)
        if len(self._batch) == self.BATCH:
            self._send()

    def _send(self) -> None:
        task, names = self._filling, self._batch
        self._filling, self._batch = task + 1, []
        worker = self._workers[task % len(self._workers)]
        self._sent[task] = worker.send((self.folder.folder, self.folder.allow_outside, names))
        self._left[task] = len(names)

    def _answer(self, task: int) -> list[Verdict] | None:
        while self._answered <= task:  # each worker answers its tasks in order
            number = self._answered
            sent = self._sent.pop(number)
            worker = self._workers[number % len(self._workers)]
            self._answers[number] = worker.answer() if sent else None
            self._answered += 1
        return self._answers[task]

    def verdict(self, name: str) -> Verdict | None:
        """The verdict on `name` if it was sent `ahead` (waiting for it), else None."""
        place = self._place.pop(name, None)
        if place is None:
            return None
        task, index = place
        if task == self._filling:  # its batch is not full yet
            self._send()
        answer = self._answer(task)
        self._left[task] -= 1
        if not self._left[task]:  # the task's verdicts are all taken: let them go
            del self._answers[task], self._left[task]
        if answer is None:
            return checked_image(self.folder, name)
        self.checked_elsewhere += 1
        return answer[index]

    def close(self) -> None:
        """End the workers (each after the task it is on)."""
        for worker in self._workers:
            worker.close()
