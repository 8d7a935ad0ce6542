"""Workspaces: a child's own copy-on-write view of the working folder, its change set, and applying it.

A child started with `isolation: copy-on-write` runs in a kernel whose working folder is an overlay (mounted by
`sandbox/overlay_mount.py`): its writes land in a host-owned folder (`Workspace.upper`), never in the folder
itself. When it ends, `read_changes` turns that folder into a `ChangeSet` (added, changed, removed files, a
diff for text), which is applied by a decision like any other (`tool_name="apply_changes"`) with `apply_changes`:
conflicts with what changed in the folder since the child started are merged where the edits do not overlap,
and kept beside the folder's file where they do. Nothing here follows a link. Where no view can be had, a child
works in a private copy of the folder instead (`copies.py`), whose change set is read against a manifest of the
copy and applied the same way.

`Checkpoints` records the folder before each turn of a main agent (what changed since the last one, through any
process: `FolderState` watches with inotify) and writes it back to one (`restore`): what `Agent.rewind` does.
"""

from .apply import AppliedFile, ApplyReport, apply_changes, mark_conflicts
from .changes import ChangeSet, FileChange, read_changes
from .checkpoints import Checkpoint, Checkpoints, FolderTooLarge
from .copies import FolderTooLargeToCopy, read_copy_changes
from .folder import ISOLATIONS, Isolation, Mechanism, Workspace, now_ns
from .journal import Journal
from .keep import KEPT_FOLDER, keep_changes, kept_sets

__all__ = [
    "ISOLATIONS",
    "KEPT_FOLDER",
    "AppliedFile",
    "ApplyReport",
    "ChangeSet",
    "Checkpoint",
    "Checkpoints",
    "FileChange",
    "FolderTooLarge",
    "FolderTooLargeToCopy",
    "Isolation",
    "Journal",
    "Mechanism",
    "Workspace",
    "apply_changes",
    "keep_changes",
    "kept_sets",
    "mark_conflicts",
    "now_ns",
    "read_changes",
    "read_copy_changes",
]
