"""Confine the calling process (and everything it starts) to a sandbox plan. Linux only, no root.

This module uses the standard library alone: it runs inside a freshly forked kernel (before
ipykernel starts) and as a script in front of a launched kernel or an MCP server:

    python enforce.py '<plan as JSON>' -- command args...

It applies the plan, then `exec`s the command. A plan is a dict:
    {"deny": [paths], "write": [folders], "network": bool, "scratch": folder}

(`scratch` is a writable folder for a moment's use; the script makes a temporary one if it is missing.)

How each part is enforced, in this order, while the process is still single-threaded:
1. A user namespace and a mount namespace of its own (plus a network namespace without
   interfaces when `network` is false: every connection then fails with ENETUNREACH).
2. Each path in `deny` that exists is covered: a folder by an empty tmpfs of mode 000, a file
   by an empty file of mode 000. Reading one fails with EACCES, also for programs it starts.
3. Landlock: writing, creating, removing and renaming files are allowed only beneath the
   `write` folders (and on a few devices such as /dev/null). Landlock also stops the process
   from changing its mounts (so the covers stay), from reaching into processes outside the
   sandbox through ptrace or /proc/PID/root, and (from ABI 6) from signalling them.
4. No capabilities are left, none can come back through `exec` (the bounding set is empty and
   `no_new_privs` is set), so root inside the namespace is an ordinary user.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import sys
import tempfile
from typing import Any

__all__ = ["SandboxUnavailable", "apply", "landlock_abi"]

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18
_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP = 38, 24

# Landlock (include/uapi/linux/landlock.h); the syscall numbers are the same on every architecture
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_WRITE_FILE, _READ_FILE = 1 << 1, 1 << 2
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE_CHAR, _MAKE_DIR, _MAKE_REG, _MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = (1 << n for n in range(6, 13))
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1, 2

_WRITING = (
    _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR | _MAKE_REG | _MAKE_SOCK | _MAKE_FIFO
    | _MAKE_BLOCK | _MAKE_SYM
)
"""The rights Landlock handles at ABI 1 that change the filesystem; REFER (ABI 2) and TRUNCATE (ABI 3) join later."""

_WRITABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx")
_WRITABLE_DEVICE_FOLDERS = ("/dev/pts", "/dev/shm")

try:
    _libc: Any = ctypes.CDLL(None, use_errno=True)
    _libc.syscall.restype = ctypes.c_long
except (OSError, AttributeError):  # not a platform with a C library to ask (Windows)
    _libc = None


class SandboxUnavailable(OSError):
    """The platform cannot enforce a plan (not Linux, no Landlock, no user namespaces)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers (0: none)."""
    if not sys.platform.startswith("linux") or _libc is None:
        return 0
    version = _libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(version), 0)


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise SandboxUnavailable(code, f"{what}: {os.strerror(code)}")
    return result


def _write(path: str, text: str) -> None:
    with open(path, "w") as file:
        file.write(text)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def encode(value: str | None) -> bytes | None:
        return None if value is None else value.encode()

    _check(_libc.mount(encode(source), target.encode(), encode(fstype), ctypes.c_ulong(flags), encode(data)),
           f"mount {target}")


def _enter_namespaces(network: bool) -> None:
    uid, gid = os.getuid(), os.getgid()
    flags = _CLONE_NEWUSER | _CLONE_NEWNS | (0 if network else _CLONE_NEWNET)
    _check(_libc.unshare(flags), "unshare (user namespaces)")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing done here shows outside


def _cover(paths: list[str], scratch: str) -> None:
    """Cover each existing path with an empty, unreadable stand-in."""
    blank = os.path.join(scratch, ".sandbox-blank")
    for path in paths:
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "mode=000,size=4k")
        elif os.path.exists(path):
            if not os.path.exists(blank):
                os.close(os.open(blank, os.O_CREAT | os.O_WRONLY, 0))
            _mount(blank, path, None, _MS_BIND)
    if os.path.exists(blank):
        os.unlink(blank)  # the covers keep it; nothing else needs it


def _restrict_writes(write: list[str], abi: int) -> None:
    handled = _WRITING | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0
    attr = _RulesetAttr(handled, 0, scoped)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 16
    ruleset = _check(_libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                                   ctypes.c_uint32(0)), "landlock_create_ruleset")
    file_rights = _WRITE_FILE | (_TRUNCATE if abi >= 3 else 0)
    try:
        rules = [(folder, handled) for folder in [*write, *_WRITABLE_DEVICE_FOLDERS]]
        rules += [(device, file_rights) for device in _WRITABLE_DEVICES]
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a folder or device this machine does not have
            try:
                rule = _PathBeneathAttr(rights if os.path.isdir(path) else rights & file_rights, fd)
                _check(_libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule),
                                     ctypes.c_uint32(0)), f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(no_new_privs)")
        _check(_libc.syscall(_SYS_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def _drop_capabilities() -> None:
    with open("/proc/sys/kernel/cap_last_cap") as file:
        last = int(file.read())
    for capability in range(last + 1):
        if _libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) < 0 and ctypes.get_errno() not in (errno.EINVAL,):
            raise SandboxUnavailable(ctypes.get_errno(), "could not drop the capability bounding set")
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3: two 32-bit words
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")


def apply(plan: dict[str, Any]) -> None:
    """Confine this process as `plan` says; call it while the process has a single thread.

    Raises `SandboxUnavailable` if the platform cannot do it (the process is then unchanged
    unless a namespace was already entered; callers end the process in that case).
    """
    abi = landlock_abi()
    if abi < 1:
        raise SandboxUnavailable(errno.ENOSYS, "this kernel offers no Landlock")
    deny = [path for path in plan.get("deny", ()) if os.path.lexists(path)]
    network = bool(plan.get("network", True))
    if deny or not network:
        _enter_namespaces(network)
        _cover(deny, plan["scratch"])
    if plan.get("remove_scratch"):
        os.rmdir(plan["scratch"])
    _restrict_writes(list(plan.get("write", ())), abi)
    _drop_capabilities()


def main(argv: list[str]) -> None:
    """`enforce.py PLAN_JSON -- COMMAND ARGS...`: apply the plan, then become the command."""
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("usage: enforce.py PLAN_JSON -- COMMAND [ARGS...]")
    plan = json.loads(argv[0])
    if not plan.get("scratch"):
        plan["scratch"] = tempfile.mkdtemp(prefix="freeact-sub-sandbox-")
        plan["remove_scratch"] = True
    try:
        apply(plan)
    except OSError as exc:
        sys.exit(f"freeact-sub sandbox: {exc}")
    os.execvp(argv[2], argv[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
