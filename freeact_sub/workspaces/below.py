"""Reach a path below a folder the host trusts without following a link: one `openat` per part, `O_NOFOLLOW`.

What a kernel can write, it can turn into a link; the host's reads and writes for checkpoints go through here,
so a link placed anywhere on the way is an `OSError` (ELOOP or ENOTDIR), never a path out of the folder.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator

__all__ = ["DIR_FLAGS", "parent_of", "put_in_place", "split_path"]

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
"""How a folder below the root is opened: never through a link."""


def split_path(path: str) -> list[str]:
    """The parts of a relative path (`a/b.csv`); `OSError` for an empty part, `.`, `..` or a NUL."""
    parts = path.split("/")
    if any(part in ("", ".", "..") or "\0" in part for part in parts):
        raise OSError(errno.EINVAL, f"not a path inside the folder: {path!r}")
    return parts


@contextlib.contextmanager
def parent_of(root: int, path: str, *, make: bool = False) -> Iterator[tuple[int, str]]:
    """The folder that holds `path` (a descriptor, closed after) and its last part; folders made if `make`."""
    *folders, name = split_path(path)
    fd = os.dup(root)
    try:
        for part in folders:
            try:
                next_fd = os.open(part, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not make:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                next_fd = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        yield fd, name
    finally:
        os.close(fd)


def put_in_place(temporary: str, name: str, dir_fd: int) -> None:
    """Rename `temporary` (written beside it) over `name` in the folder `dir_fd`; if that fails, remove it."""
    try:
        os.rename(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=dir_fd)
        raise
