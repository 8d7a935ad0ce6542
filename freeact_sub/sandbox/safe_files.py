"""Files the host writes where a kernel may have written before: no link is followed on the way.

A kernel (or a cloned repository) can leave a link where the host is about to write, aiming the host's
write at a file of the person's (`.freeact-sub/images` → `~/.config/autostart`). Below a folder the host
trusts (the working folder the person chose), every part of the path is opened with `O_NOFOLLOW` from the
folder before it (`openat`), made when missing, and a new file is created with `O_EXCL`: a link anywhere
on the way is refused with an `OSError` (ELOOP or ENOTDIR) instead of followed.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["folders_inside", "make_folder", "open_folder", "read_inside", "trusted_base", "write_new"]

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def trusted_base(path: Path, working_dir: Path) -> Path:
    """The folder whose own path is trusted for `path`: the working folder if `path` is inside it, else its parent."""
    path, working_dir = Path(os.path.abspath(path)), Path(os.path.abspath(working_dir))
    return working_dir if path.is_relative_to(working_dir) and path != working_dir else path.parent


def open_folder(base: Path, folder: Path, *, mode: int = 0o700) -> int:
    """A descriptor of `folder` (inside `base`), each part below `base` opened without following a link.

    Missing parts are made. The caller closes the descriptor.
    """
    relative = Path(os.path.abspath(folder)).relative_to(os.path.abspath(base))
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in relative.parts:
            try:
                next_fd = os.open(part, _FOLDER, dir_fd=fd)
            except FileNotFoundError:
                try:
                    os.mkdir(part, mode, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile: opened (without following) below
                next_fd = os.open(part, _FOLDER, dir_fd=fd)
            os.close(fd)
            fd = next_fd
    except BaseException:
        os.close(fd)
        raise
    return fd


def make_folder(base: Path, folder: Path, *, mode: int = 0o700) -> Path:
    """`folder` made (inside `base`) without following a link on the way; returns it."""
    os.close(open_folder(base, folder, mode=mode))
    return folder


def write_new(folder_fd: int, name: str, data: bytes, *, mode: int = 0o600) -> None:
    """Write `data` to a new file `name` in the folder `folder_fd` (never an existing file or a link)."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=folder_fd)
    with os.fdopen(fd, "wb") as file:
        file.write(data)


def read_inside(base: Path, relative: Path | str, *, limit: int = 1_000_000) -> bytes:
    """The bytes of the file `relative` (inside `base`), no link followed on the way nor at its end.

    Missing parts are not made: a missing file is a `FileNotFoundError`, a link anywhere on the way an
    `OSError` (ELOOP or ENOTDIR), a path that leaves `base` (`..`, absolute) a `ValueError`. At most `limit`
    bytes are read.
    """
    parts = Path(relative).parts
    if not parts or Path(relative).is_absolute() or ".." in parts:
        raise ValueError(f"{relative}: not a path inside {base}")
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            next_fd = os.open(part, _FOLDER, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        # non-blocking: a FIFO planted in the file's place must not hang the host
        file_fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
    finally:
        os.close(fd)
    with os.fdopen(file_fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file_fd).st_mode):
            raise IsADirectoryError(errno.EISDIR, "not a regular file", str(relative))
        return file.read(limit)


def folders_inside(base: Path, relative: Path | str) -> tuple[list[str], list[str]]:
    """`(folders, links)`: the names of the sub-folders of `relative` (inside `base`) and of the links in it.

    No link is followed on the way; a missing folder has none. Links are named, never entered.
    """
    folder = Path(relative)
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return [], []
    try:
        for part in folder.parts:
            try:
                next_fd = os.open(part, _FOLDER, dir_fd=fd)
            except FileNotFoundError:
                return [], []
            os.close(fd)
            fd = next_fd
        folders, links = [], []
        with os.scandir(fd) as entries:
            for entry in entries:
                if entry.is_symlink():
                    links.append(entry.name)
                elif entry.is_dir(follow_symlinks=False):
                    folders.append(entry.name)
        return sorted(folders), sorted(links)
    finally:
        os.close(fd)
