"""What every reader of a file a user names checks before it opens it, in the lowest layer
so that storage, metrics and rubrics readers can share it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO, a named pipe"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def regular_file(path: Path | str, error: type[Exception] = ValueError) -> Path:
    """`path` (symbolic links followed) when it is a regular file, else `error` naming it:
    one `stat`, before the reader opens it. Opening a FIFO for reading blocks until a
    writer comes, which may be never; a device or a directory is not a file to parse."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise error(f"{path}: cannot read: {reason}") from None
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "something else")
        raise error(f"{path}: not a regular file but {kind}")
    return Path(path)
