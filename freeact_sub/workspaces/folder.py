"""One child's workspace: the host-owned folders of its copy-on-write view (or its private copy), and when it
began."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .changes import ChangeSet, read_changes
from .copies import Manifest, copy_folder, read_copy_changes

__all__ = ["ISOLATIONS", "Isolation", "Mechanism", "Workspace", "copies_root", "now_ns", "unlock_folders"]

Isolation = Literal["shared", "copy-on-write"]
"""How a child's kernel sees the working folder: `shared` (writes land in it at once, the default) or
`copy-on-write` (a view of its own; its writes come back as a change set)."""
ISOLATIONS: tuple[str, ...] = ("shared", "copy-on-write")

Mechanism = Literal["overlay", "copy"]
"""How a child's workspace is made: an `overlay` view of the folder mounted in its kernel's namespace, or a
private `copy` of the folder where no view can be had."""


def copies_root() -> str:
    """The folder that holds the private copies of this user's hosts, `$TMPDIR/freeact-sub-<uid>-copies`: made once,
    mode 0700, never a link, refused when it is another user's or open to others.

    Not in the host's private root: a confined kernel sees that root empty but for its own folder, and a copy is
    the kernel's working folder."""
    root = os.path.join(tempfile.gettempdir(), f"freeact-sub-{os.getuid()}-copies")
    with contextlib.suppress(FileExistsError):
        os.mkdir(root, 0o700)
    info = os.lstat(root)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise PermissionError(f"{root} is not a private folder of this user (a link, another user's, or open to "
                              "others): remove it, or set TMPDIR to another folder")
    return root


def now_ns() -> int:
    """The clock file times are taken from (coarse: a file changed after this moment never has an older ctime)."""
    return time.clock_gettime_ns(getattr(time, "CLOCK_REALTIME_COARSE", time.CLOCK_REALTIME))


_OWNER = "owner"
_swept: set[str] = set()


def _sweep_once(root: str) -> None:
    """Remove the copies of hosts that died (their `owner` process is gone), once per process and root."""
    if root in _swept:
        return
    _swept.add(root)
    for folder in Path(root).glob("copy-*"):
        try:
            owner = int((folder / _OWNER).read_text())
            os.kill(owner, 0)
        except ProcessLookupError:
            Workspace(folder=folder, lower=folder, mechanism="copy").remove()
        except (OSError, ValueError):
            continue  # being made, or another user's process: left alone


@dataclass(kw_only=True)
class Workspace:
    """The folders behind one child's view of `lower` (the working folder).

    `folder` is the host's (in the private root no kernel sees): `upper/` takes the child's writes through the
    overlay, `work/` is the overlay's scratch. `started_ns` is when the view was made (`now_ns()`): what
    changed in the working folder after it is a possible conflict. A `copy` workspace (`create_copy`) holds
    `copy/` instead, the kernel's working folder, with the `manifest` of what was copied.
    """

    folder: Path
    lower: Path
    agent_id: str = ""
    started_ns: int = field(default_factory=lambda: now_ns())
    mechanism: Mechanism = "overlay"
    manifest: Manifest | None = None
    """For a copy: each path as it was copied (what the child did not touch is found by it, not read)."""
    _unused: list[Path] = field(default_factory=list, repr=False)
    """Its own folders it did not need, having adopted a pooled view's (`adopt`): removed with it."""

    @classmethod
    def create_copy(cls, lower: Path, limit: int, agent_id: str = "") -> Workspace:
        """A private copy of `lower` in a new folder of `copies_root()`; `FolderTooLargeToCopy` (nothing left
        behind) when its files hold more than `limit` bytes."""
        lower = Path(os.path.realpath(lower))
        root = copies_root()
        _sweep_once(root)
        path = Path(tempfile.mkdtemp(prefix="copy-", dir=root))
        try:
            (path / _OWNER).write_text(str(os.getpid()))
            os.mkdir(path / "copy", 0o700)
            started = now_ns()  # before the copy: what the folder changes while it is made may conflict
            manifest = copy_folder(lower, path / "copy", limit)
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise
        return cls(folder=path, lower=lower, agent_id=agent_id, started_ns=started, mechanism="copy",
                   manifest=manifest)

    @classmethod
    def create(cls, folder: str | os.PathLike[str], lower: Path, agent_id: str = "") -> Workspace:
        """Make `upper/` and `work/` in `folder` (a new private folder of the host's) for a view of `lower`."""
        path = Path(folder)
        for name in ("upper", "work"):
            os.mkdir(path / name, 0o700)
        return cls(folder=path, lower=Path(os.path.realpath(lower)), agent_id=agent_id)

    def adopt(self, view: Workspace) -> None:
        """Take over the folders of `view`, a view of the same folder that a pooled kernel was booted in, in place of
        this workspace's own (still empty, removed), and start now.

        The view was mounted before this child started, but nothing was written into it (its upper layer is empty)
        and its kernel looked up nothing in it but the folder itself: it shows each file as the folder holds it now,
        not as it was when the view was mounted. So the child's base is the folder at this moment, and what changes
        in it from now on may conflict (`started_ns`), as for a view mounted now.
        """
        if self.mechanism != "overlay" or view.mechanism != "overlay" or view.lower != self.lower:
            raise ValueError(f"a pooled view of {view.lower} cannot serve a workspace over {self.lower}")
        if view.folder != self.folder:
            self._unused.append(self.folder)  # removed with the workspace: not on the child's way to its first cell
        self.folder = view.folder
        self.started_ns = now_ns()

    def written(self) -> bool:
        """Whether anything was written into the view (its upper layer holds an entry)."""
        with os.scandir(self.upper) as entries:
            return next(entries, None) is not None

    @property
    def upper(self) -> Path:
        """Where the child's writes land (whiteouts for removals), or its copy (where it works)."""
        return self.folder / ("copy" if self.mechanism == "copy" else "upper")

    def describe(self) -> str:
        """How it is made, for the child's start: which mechanism the child got."""
        if self.mechanism == "copy":
            return "a workspace of its own (a private copy of the folder: copy-on-write views are not available)"
        return "a workspace of its own (copy-on-write: an overlay of the folder)"

    def read_changes(self) -> ChangeSet:
        """Its change set, against the folder as it is now (read once its kernel has stopped)."""
        if self.mechanism == "copy" and self.manifest is not None:
            return read_copy_changes(self.upper, self.lower, self.manifest, agent_id=self.agent_id,
                                     started_ns=self.started_ns)
        return read_changes(self.upper, self.lower, agent_id=self.agent_id, started_ns=self.started_ns)

    def plan(self) -> dict[str, str]:
        """The sandbox plan's `overlay` entry (`sandbox/overlay_mount.py`)."""
        return {"lower": str(self.lower), "upper": str(self.upper), "work": str(self.folder / "work")}

    def remove(self) -> None:
        """Remove its folders (its change set was applied or saved)."""
        if self.mechanism == "copy":  # a folder the child made unwritable would stay otherwise
            unlock_folders(self.folder)
        for folder in (*self._unused, self.folder):
            shutil.rmtree(folder, ignore_errors=True)


def unlock_folders(top: Path) -> None:
    """Make each folder under `top` its owner's to write again (a kernel may have made one unwritable, which would
    keep what is in it from being removed); a link is never followed, to a folder or on the way."""
    for _, folders, _, parent in os.fwalk(top, follow_symlinks=False):  # each folder unlocked before it is entered
        for name in folders:
            with contextlib.suppress(OSError):
                fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
                try:
                    os.fchmod(fd, 0o700)
                finally:
                    os.close(fd)
