"""Files the host writes where a kernel may have written before: no link is followed on the way.

A kernel (or a cloned repository) can leave a link where the host is about to write, aiming the host's
write at a file of the person's (`.freeact-sub/images` → `~/.config/autostart`). Below a folder the host
trusts (the working folder the person chose), every part of the path is opened with `O_NOFOLLOW` from the
folder before it (`openat`), made when missing, and a new file is created with `O_EXCL`: a link anywhere
on the way is refused with an `OSError` (ELOOP or ENOTDIR) instead of followed.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["make_folder", "open_folder", "trusted_base", "write_new"]

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
