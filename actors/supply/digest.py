"""The digests a pin compares: a file's sha256, and a folder's (an installed package tree) as one sha256 over
its files' relative paths, executable bits, link targets and contents, in sorted order."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Final

CHUNK_BYTES: Final = 1 << 20  # read at a time: a package's files are small, a binary may not be
MISSING: Final = "missing"  # what a path that is gone digests to: never equal to a recorded digest


def file_sha256(path: Path) -> str:
    """`sha256:HEX` of the file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(CHUNK_BYTES):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def tree_sha256(folder: Path) -> str:
    """`sha256:HEX` of a folder: each entry's relative path, then `l` and its link target (a symlink, not
    followed), or `x`/`-` (executable or not) and its content's sha256. Timestamps do not count."""
    digest = hashlib.sha256()
    entries: list[str] = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in [*files, *(d for d in dirs if os.path.islink(os.path.join(root, d)))]:
            entries.append(os.path.relpath(os.path.join(root, name), folder))
    for relative in sorted(entries):
        path = folder / relative
        if path.is_symlink():
            line = f"{relative}\0l\0{os.readlink(path)}\n"
        else:
            mode = "x" if os.access(path, os.X_OK) else "-"
            line = f"{relative}\0{mode}\0{file_sha256(path)}\n"
        digest.update(line.encode("utf-8", "surrogateescape"))
    return f"sha256:{digest.hexdigest()}"


def digest_of(path: Path) -> str:
    """A file's or a folder's digest as above; MISSING when the path is gone or unreadable."""
    try:
        if path.is_dir() and not path.is_symlink():
            return tree_sha256(path)
        return file_sha256(path)
    except OSError:
        return MISSING
