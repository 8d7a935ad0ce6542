"""The host imports nothing an agent's kernel wrote: a finder in front of Python's own path finder.

A notebook's kernel (the host in JupyterLab) and a program run from a folder import from that folder first
(`sys.path[0]`). A kernel that may write there could plant `json5.py` or `requests/__init__.py` and have its
code run with the person's rights at the host's next `import`. So, once an agent has started in this process
(or `freeact_sub.notebook` is imported), every module Python's path finder finds is checked before it runs:
a file (or a link on its way) in a folder an agent's kernel could write, changed while it could (see
`import_windows`), is refused with an `UntrustedModuleError` that names the file and how to trust it, unless
the person trusted that very content (`trust_module`). Source is read once, checked and run from the same
bytes; a cached `.pyc` changed in such a window is not used (the source is compiled instead).
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder, SourceFileLoader
from pathlib import Path
from types import ModuleType

from .import_windows import STORE, GuardStore, Window
from .profiles import SandboxProfile

__all__ = ["UntrustedModuleError", "guard_imports", "guarded", "install", "open_window", "trust_module", "watch_agent"]


class UntrustedModuleError(ImportError):
    """The host refused to import a module an agent's kernel may have written (`path`), until the person trusts it."""

    def __init__(self, name: str, path: str, window: Window) -> None:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(window.start / 1e9))
        super().__init__(
            f"freeact-sub refused to import {name!r} from {path}: the file was created or changed while an agent's "
            f"kernel could write there (since {since}), so an agent may have written it. Look at it; if it is yours, "
            f"trust this content with freeact_sub.trust_module({path!r}) and import again.",
            name=name,
            path=path,
        )


_lock = threading.Lock()
_stores: dict[str, GuardStore] = {}
"""The stores this process knows: its own agents' working folders, and those found above `sys.path`'s folders."""
_looked: set[str] = set()


def guard_imports() -> None:
    """Refuse, from now on in this process, to import a module an agent's kernel may have written.

    `Agent.start()` and importing `freeact_sub.notebook` do this; call it first in a program of yours to guard its
    imports before any agent starts (a module an agent wrote in an earlier run, in this folder, is then refused
    too). A refused module raises `UntrustedModuleError`, which names the file; `trust_module(path)` lets it in.
    """
    install()


def install() -> None:
    """Put the guard in front of Python's path finder (once per process), and learn the windows of the folders on
    `sys.path` and above them."""
    with _lock:
        if not any(isinstance(finder, _Guard) for finder in sys.meta_path):
            where = next(
                (index for index, finder in enumerate(sys.meta_path) if finder is PathFinder), len(sys.meta_path)
            )
            sys.meta_path.insert(where, _Guard())
    _learn_path()


def open_window(working_dir: Path, roots: list[str]) -> tuple[GuardStore, Window]:
    """Open a window for an agent starting in `working_dir` whose kernels may write `roots`; install the guard."""
    install()
    store = _store(os.path.realpath(working_dir))
    return store, store.open_window(roots)


def watch_agent(working_dir: Path, profile: SandboxProfile) -> Callable[[], None]:
    """Open a window for a main agent about to start its kernels under `profile`; the function returned closes it
    (call it once they are stopped)."""
    store, window = open_window(working_dir, profile.writable_folders(working_dir))
    return functools.partial(store.close_window, window)


def guarded() -> bool:
    """Whether the guard is in this process's import system."""
    return any(isinstance(finder, _Guard) for finder in sys.meta_path)


def trust_module(path: str | os.PathLike[str]) -> None:
    """Trust the file at `path` as it is now: the host imports it although an agent's kernel may have written it.

    Only this content is trusted: a later change (yours or a kernel's) is refused again. Kept beside the folder's
    windows, so a later process trusts it too. `FileNotFoundError` if there is no such file.
    """
    real = os.path.realpath(path)
    with open(real, "rb") as file:
        digest = hashlib.sha256(file.read()).hexdigest()
    install()
    for store in _stores_over(real):  # a file no window covers is imported anyway
        if any(window.covers(real) for window in store.windows):
            store.trust(real, digest)


class _Guard(MetaPathFinder):
    """Finds what `PathFinder` finds, then refuses it if an agent's kernel may have written it."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        spec = PathFinder.find_spec(fullname, path, target)
        if spec is None or not spec.has_location or spec.origin is None:
            return spec  # not found, or a namespace package (no file of its own runs)
        windows = _windows_over(spec.origin)
        if not windows:
            return spec
        _check_links(fullname, spec.origin, windows)
        if type(spec.loader) is SourceFileLoader:
            spec.loader = loader = _CheckedLoader(fullname, spec.origin)
            loader.windows = windows
        elif (window := _changed_in(os.stat(spec.origin), windows)) is not None and not _trusted_file(spec.origin):
            raise UntrustedModuleError(fullname, spec.origin, window)  # an extension module or a lone .pyc
        return spec


class _CheckedLoader(SourceFileLoader):
    """Reads the source once, checks those very bytes, and uses no `.pyc` changed while a kernel could write."""

    windows: list[Window]
    """The windows over its file, found with it."""

    def get_data(self, path: str) -> bytes:
        with open(path, "rb") as file:
            data = file.read()
            status = os.fstat(file.fileno())  # after the read: a write during it has moved the change time on
        window = _changed_in(status, self.windows)
        if window is None:
            return data
        if path != self.path:
            raise OSError(f"{path} was written while an agent's kernel could write there; compiling the source")
        real = os.path.realpath(path)
        if _trusted_digest(real) == hashlib.sha256(data).hexdigest():
            return data
        raise UntrustedModuleError(self.name, path, window)


def _check_links(name: str, origin: str, windows: list[Window]) -> None:
    """Refuse a link on the way to `origin`, inside a watched folder, made while a kernel could write there."""
    lexical = os.path.abspath(origin)
    roots = {root for window in windows for root in window.roots if _within(lexical, root)}
    if not roots:
        return
    current = root = max(roots, key=len)
    for part in Path(lexical).relative_to(root).parts:
        current = os.path.join(current, part)
        try:
            status = os.lstat(current)
        except OSError:
            return
        if stat.S_ISLNK(status.st_mode) and (window := _changed_in(status, windows)) is not None:
            raise UntrustedModuleError(name, current, window)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _changed_in(status: os.stat_result, windows: list[Window]) -> Window | None:
    return next((window for window in windows if window.holds(status.st_ctime_ns)), None)


def _trusted_digest(real: str) -> str | None:
    return next((digest for store in _stores_over(real) if (digest := store.trusted.get(real)) is not None), None)


def _trusted_file(path: str) -> bool:
    real = os.path.realpath(path)
    expected = _trusted_digest(real)
    if expected is None:
        return False
    try:
        with open(real, "rb") as file:
            return hashlib.sha256(file.read()).hexdigest() == expected
    except OSError:
        return False


def _windows_over(path: str) -> list[Window]:
    lexical, real = os.path.abspath(path), os.path.realpath(path)
    return [window for store in _stores_over(lexical, real) for window in store.windows_over(lexical, real)]


def _stores_over(*paths: str) -> list[GuardStore]:
    """The stores whose folder or windows may cover one of `paths`, read again where they changed."""
    _learn_path()
    with _lock:
        stores = list(_stores.values())
    near = [store for store in stores if any(store.may_cover(path) for path in paths)]
    for store in near:
        store.refresh()
    return near


def _store(folder: str) -> GuardStore:
    with _lock:
        if folder not in _stores:
            _stores[folder] = GuardStore(folder=folder)
        store = _stores[folder]
    store.refresh()
    return store


def _learn_path() -> None:
    """Find the stores of the folders on `sys.path` (`''` is the current folder) and of the folders above them."""
    for entry in list(sys.path):
        if not isinstance(entry, str):
            continue
        key = entry or f"{entry}\0{os.getcwd()}"  # '' is whatever folder is current
        if key in _looked:
            continue
        _looked.add(key)
        folder = Path(os.path.realpath(entry or os.getcwd()))
        for candidate in (folder, *folder.parents):
            if (candidate / STORE).is_file():
                _store(str(candidate))
