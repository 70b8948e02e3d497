"""Image files named by an imported file are untrusted: a path must stay inside the images
folder (no `..`, absolute path or symlink leading out, unless the user allows it), and the
file must be an image Pillow decodes, in a known format, under the decompression-bomb
limit. The screens use the same check, so a file broken after import shows a reason
instead of crashing them."""

from __future__ import annotations

import os
import stat
import warnings
from functools import lru_cache
from pathlib import Path

from rubrics import printable

FORMATS = ("PNG", "JPEG", "GIF", "WEBP", "BMP", "TIFF")
MAX_PIXELS = 89_478_485  # Pillow's own decompression-bomb threshold (0.25 GiB of RGBA)
OUTSIDE_HINT = "--allow-outside-images allows it"


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
