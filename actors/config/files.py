"""Reading a file the config names (the config itself, a secret's file): a regular file only, and at most a
cap of it. Opening does not wait for a FIFO's writer, and a device such as /dev/zero is never read."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

READ_SIZE: Final = 65536


def shown_path(written: str | os.PathLike[str], resolved: Path) -> str:
    """A path as the file has it and, when that differs, as it was resolved: 'data' (/etc/gw/data)."""
    text = os.fspath(written)
    return repr(text) if text == str(resolved) else f"{text!r} ({resolved})"


class NotReadableError(Exception):
    """A path that is not a regular file, or a file past its cap: the reason, as said to the operator."""


def read_regular_file(file: Path, max_bytes: int, *, what: str = "a file") -> bytes:
    """The bytes of `file`. IsADirectoryError for a folder; NotReadableError for a FIFO, a device or a
    socket (`what` says what to give instead) and for a file of more than `max_bytes`; OSError otherwise."""
    fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(file)
        if not stat.S_ISREG(mode):
            raise NotReadableError(f"not a regular file (a FIFO, a device or a socket); give {what}")
        chunks, size = [], 0
        while (chunk := os.read(fd, READ_SIZE)) and size <= max_bytes:
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > max_bytes:
        raise NotReadableError(f"larger than {max_bytes} bytes; not read")
    return b"".join(chunks)
