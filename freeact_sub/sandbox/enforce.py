"""Confine the calling process (and everything it starts) to a sandbox plan. Linux only, no root.

This module uses the standard library alone: it runs inside a freshly forked kernel (before
ipykernel starts) and as a script in front of a launched kernel or an MCP server:

    python run_confined.py '<plan as JSON>' -- command args...

(`run_confined.py` applies the plan with this module, seals, then `exec`s the command.)
A plan is a dict of absolute paths:
    {"deny": [paths], "reveal": {denied folder: [folders]}, "read_only": [paths], "private_root": folder,
     "own": [folders], "write": [folders], "network": bool or [hosts], "unix_sockets": [paths], "scratch": folder,
     "proxy": {"socket": path, "port": int}, "limits": {"memory": bytes, "processes": n}}

(`scratch` is a writable folder for a moment's use; the script makes a temporary one if it is missing.)

How it is enforced, in this order, while the process is still single-threaded (the sandbox page of the
docs says why each step is there):
1. user and mount namespaces (with `memory` and `processes` as rlimits), and a network namespace unless
   `network` is true: no interfaces when it is false; only loopback for a list of hosts, where a socket
   listening on 127.0.0.1:`proxy.port` is handed to the host's proxy through `proxy.socket`;
2. a /dev/pts instance of its own; 3. `deny` covered (mode 000), a denied folder with folders to `reveal` by an
   empty tmpfs with only those bound back, read-only; 4. `read_only` bound read-only;
5. `private_root` covered by an empty tmpfs with only the `own` folders bound back;
6. Landlock: writes only beneath `write` (and a few devices), no mount changes, no reach into outside
   processes, abstract sockets or (ABI 6) signals; 7. no capabilities, none regained (`no_new_privs`).
Then `seal()`, once the process has bound its own sockets, puts a seccomp filter (`seccomp.py`) on every thread: no new
Unix socket (unless `unix_sockets` names some; every other socket bound to a path is then covered), no VM
socket, no io_uring, no keyring calls (the host's session keyring), no nested user namespace (`clone3` falls
back to `clone`, whose flags it reads), and no system call of another architecture's table.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from typing import Any

__all__ = ["SandboxUnavailable", "apply", "landlock_abi", "platform_gaps", "seal"]

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 32, 1024, 2048, 1 << 21
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18
_ST_TO_MS = ((2, _MS_NOSUID), (4, _MS_NODEV), (8, _MS_NOEXEC), (1024, _MS_NOATIME), (2048, _MS_NODIRATIME),
             (4096, _MS_RELATIME))
"""statvfs flags of a mount that a read-only remount in a user namespace must keep (they are locked)."""
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


def platform_gaps() -> list[str]:
    """What this machine's Landlock cannot refuse (empty from ABI 6 on: Linux 6.12 or newer)."""
    abi = landlock_abi()
    gaps = []
    if 1 <= abi < 3:
        gaps.append("truncating files outside its writable folders (Landlock ABI < 3)")
    if 1 <= abi < 6:
        gaps.append("signals to processes outside the sandbox (Landlock ABI < 6)")
    return gaps


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


def _set_rlimits(limits: dict[str, Any]) -> None:
    """`RLIMIT_DATA` and `RLIMIT_NPROC`, soft and hard. Set inside the new user namespace: Linux counts a user's
    processes per namespace, and a namespace made after a low `RLIMIT_NPROC` would cap the user's processes in
    every namespace above it with that limit too."""
    import resource

    for name, value in (("RLIMIT_DATA", limits.get("memory")), ("RLIMIT_NPROC", limits.get("processes"))):
        if value is not None:
            resource.setrlimit(getattr(resource, name), (int(value), int(value)))


_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 1


def _hand_over_proxy_port(proxy: dict[str, Any]) -> None:
    """Bring loopback up in this new network namespace, listen on 127.0.0.1:`port`, and hand the listening socket
    to the host's proxy through the Unix socket at `socket`: the host accepts the connections, this process keeps
    nothing of it."""
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        request = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(probe, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(probe, _SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | _IFF_UP))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener, \
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as channel:
        listener.bind(("127.0.0.1", int(proxy["port"])))
        listener.listen(128)
        channel.settimeout(30)  # a host that does not answer ends the start, not hangs it
        channel.connect(proxy["socket"])
        socket.send_fds(channel, [b"P"], [listener.fileno()])
        if channel.recv(1) != b"K":
            raise SandboxUnavailable(errno.ECONNREFUSED, "the host's proxy did not take the kernel's port")


def _cover(paths: list[str], scratch: str, *, tolerant: bool = False) -> None:
    """Cover each existing path with an empty, unreadable stand-in (`tolerant`: skip one that cannot be covered,
    such as a socket in a folder this user cannot reach, which the process cannot reach either)."""
    blank = os.path.join(scratch, ".sandbox-blank")
    for path in paths:
        try:
            if os.path.isdir(path):
                _mount("tmpfs", path, "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "mode=000,size=4k")
            elif os.path.exists(path):
                if not os.path.exists(blank):
                    os.close(os.open(blank, os.O_CREAT | os.O_WRONLY, 0))
                _mount(blank, path, None, _MS_BIND)
        except (SandboxUnavailable, PermissionError, FileNotFoundError):
            if not tolerant:
                raise
    if os.path.exists(blank):
        os.unlink(blank)  # the covers keep it; nothing else needs it


def _bound_sockets(allowed: set[str], own: Any) -> list[str]:
    """The paths of the Unix sockets bound on this machine now (/proc/net/unix), but `allowed` and those in `own`."""
    found = []
    with open("/proc/net/unix") as table:
        next(table)
        for line in table:
            fields = line.split(None, 7)
            if len(fields) == 8 and fields[7].startswith("/"):
                path = fields[7].rstrip("\n")
                if path not in allowed and not any(path.startswith(folder.rstrip("/") + "/") for folder in own):
                    found.append(path)
    return sorted(set(found))


def _own_terminals() -> None:
    """A pseudo-terminal instance of this namespace's own: the host's /dev/pts/N are not there to open.

    Programs that need a terminal (`pty.openpty()`, pexpect) still get one, from the new instance.
    """
    try:
        _mount("devpts", "/dev/pts", "devpts", _MS_NOSUID | _MS_NOEXEC, "newinstance,ptmxmode=0666,mode=600")
    except SandboxUnavailable:
        # no devpts of its own here: hide the host's terminals all the same (no new terminals then)
        _mount("tmpfs", "/dev/pts", "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "mode=000,size=4k")
        return
    if os.path.exists("/dev/ptmx"):
        _mount("/dev/pts/ptmx", "/dev/ptmx", None, _MS_BIND)


def _locked_flags(path: str) -> int:
    flags = os.statvfs(path).f_flag
    return sum(mount_flag for statvfs_flag, mount_flag in _ST_TO_MS if flags & statvfs_flag)


def _bind_read_only(paths: list[str]) -> None:
    """Bind each existing path read-only onto itself (a mount point also cannot be renamed or removed)."""
    for path in paths:
        if not os.path.exists(path):
            continue
        _mount(path, path, None, _MS_BIND | _MS_REC)
        _mount(None, path, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _locked_flags(path))


def _hide_others(root: str, own: list[str]) -> None:
    """Cover `root` with an empty read-only tmpfs and bind only the `own` folders (inside it) back."""
    kept = []
    for folder in own:
        relative = os.path.relpath(folder, root)
        if relative.startswith(".."):
            raise SandboxUnavailable(errno.EINVAL, f"{folder} is not inside {root}")
        kept.append((relative, os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)))
    try:
        _mount("tmpfs", root, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0711,size=64k")
        for relative, fd in kept:
            place = os.path.join(root, relative)
            os.makedirs(place, mode=0o711, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", place, None, _MS_BIND | _MS_REC)
        _mount(None, root, None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    finally:
        for _, fd in kept:
            os.close(fd)


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


def seal(plan: dict[str, Any]) -> None:
    """Install the plan's seccomp filter on every thread of this process (after `apply`).

    Call it once the process has made every socket it listens on: from then on it can make no new Unix
    socket (unless the plan allows them), so it can connect to none it was not handed (see `seccomp.py`).
    """
    try:
        _SECCOMP.install(bool(plan.get("unix_sockets")))
    except OSError as exc:
        raise SandboxUnavailable(exc.errno or errno.ENOSYS, str(exc)) from None


def apply(plan: dict[str, Any]) -> None:
    """Confine this process as `plan` says; call it while the process has a single thread.

    Raises `SandboxUnavailable` if the platform cannot do it (the process is then unchanged
    unless a namespace was already entered; callers end the process in that case). `seal()` follows
    once the process has made the sockets it listens on.
    """
    abi = landlock_abi()
    if abi < 1:
        raise SandboxUnavailable(errno.ENOSYS, "this kernel offers no Landlock")
    deny = [path for path in plan.get("deny", ()) if os.path.lexists(path)]
    network = plan.get("network", True)
    # the host's table of bound sockets, read before a network namespace of its own shows only its own
    hidden_anyway = [plan.get("private_root") or "/nonexistent", *plan.get("own", ())]
    bound = _bound_sockets(set(plan["unix_sockets"]), hidden_anyway) if plan.get("unix_sockets") else []
    _enter_namespaces(network is True)
    if plan.get("overlay"):  # a workspace of its own: everything below applies to the view
        _sibling("overlay_mount").mount_over(plan["overlay"])
    _set_rlimits(plan.get("limits") or {})
    if isinstance(network, list) and plan.get("proxy"):
        _hand_over_proxy_port(plan["proxy"])
    _own_terminals()
    reveal = {root: shown for root, shown in (plan.get("reveal") or {}).items() if root in deny}
    _cover([path for path in deny if path not in reveal], plan["scratch"])
    for root, shown in reveal.items():
        _hide_others(root, shown)  # bound back read-only with `read_only` below
    if bound:  # the process may make Unix sockets: hide every bound one it was not handed
        _cover(bound, plan["scratch"], tolerant=True)
    _bind_read_only([*plan.get("read_only", ()), *(path for shown in reveal.values() for path in shown)])
    if plan.get("private_root") and os.path.isdir(plan["private_root"]):
        _hide_others(plan["private_root"], list(plan.get("own", ())))
    if plan.get("remove_scratch"):
        os.rmdir(plan["scratch"])
    _restrict_writes(list(plan.get("write", ())), abi)
    _drop_capabilities()


def _sibling(name: str) -> Any:
    """A module beside this one, loaded by its path (this file runs where the package is not imported)."""
    import importlib.util

    path = os.path.join(os.path.dirname(__file__), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_freeact_sub_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_SECCOMP = _sibling("seccomp")
