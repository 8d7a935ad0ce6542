"""The seccomp filter a confined process puts on every thread once its own sockets are bound (`enforce.seal`).

The standard library alone, loaded by its path beside `enforce.py` (it runs where the package is not imported).
It refuses: a new Unix socket (unless the plan allows them), a VM socket, io_uring (which runs socket and
connect operations no filter sees), the keyring calls (the host's session keyring), a nested user namespace
(`clone3` gets ENOSYS, so the C library falls back to `clone`, whose flags the filter reads), and every
system call of another architecture's table.
"""

from __future__ import annotations

import ctypes
import errno
import os
from typing import Any

__all__ = ["install", "program"]

# seccomp (include/uapi/linux/seccomp.h, filter.h, audit.h): per machine, the architecture's audit id, the
# numbers of seccomp(2) and socket(2); io_uring_setup/enter/register are 425-427 on both
_SECCOMP_ARCHES = {"x86_64": (0xC000003E, 317, 41), "aarch64": (0xC00000B7, 277, 198)}
_IO_URING_CALLS = (425, 426, 427)
_KEYRING_CALLS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}
"""add_key, request_key, keyctl: the kernel shares the host's session keyring otherwise."""
_NAMESPACE_CALLS = {"x86_64": (272, 56), "aarch64": (97, 220)}
"""unshare, clone: refused with CLONE_NEWUSER in their flags (the first argument on both)."""
_CLONE3 = 435
"""clone3 takes its flags in a struct no filter can read: ENOSYS, and the C library falls back to clone."""
_CLONE_NEWUSER = 0x10000000
_X32_SYSCALL_BIT = 0x40000000
_AF_UNIX, _AF_VSOCK = 1, 40
_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC = 1, 1
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_ABS_W, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_NR, _ARCH, _ARG0 = 0, 4, 16
"""Offsets in `struct seccomp_data` (the first argument's low 32 bits on a little-endian machine)."""


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def program(
    arch: int, socket_call: int, unix_sockets: bool, machine: str = "x86_64"
) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jump if true, jump if false, k) instructions; jumps count instructions skipped."""
    refused_families = [_AF_VSOCK] if unix_sockets else [_AF_UNIX, _AF_VSOCK]
    deny = _RET_ERRNO | errno.EACCES
    program: list[tuple[int, int, int, int]] = [
        (_LD_ABS_W, 0, 0, _ARCH),
        (_JEQ_K, 1, 0, arch),
        (_RET_K, 0, 0, _RET_ERRNO | errno.EPERM),  # another architecture's system call table
        (_LD_ABS_W, 0, 0, _NR),
        (_JGE_K, 0, 1, _X32_SYSCALL_BIT),
        (_RET_K, 0, 0, _RET_ERRNO | errno.EPERM),
    ]
    for call in _IO_URING_CALLS:  # io_uring runs socket and connect operations that no filter sees
        program += [(_JEQ_K, 0, 1, call), (_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    for call in _KEYRING_CALLS[machine]:  # no keyring of the host's: as container runtimes' default filters
        program += [(_JEQ_K, 0, 1, call), (_RET_K, 0, 0, _RET_ERRNO | errno.EPERM)]
    program += [(_JEQ_K, 0, 1, _CLONE3), (_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    unshare, clone = _NAMESPACE_CALLS[machine]
    # no nested user namespace (a single-threaded process could make one, and in it every capability again)
    program += [
        (_JEQ_K, 1, 0, unshare),
        (_JEQ_K, 0, 4, clone),
        (_LD_ABS_W, 0, 0, _ARG0),
        (_JSET_K, 0, 1, _CLONE_NEWUSER),
        (_RET_K, 0, 0, _RET_ERRNO | errno.EPERM),
        (_RET_K, 0, 0, _RET_ALLOW),
    ]
    program += [(_JEQ_K, 1, 0, socket_call), (_RET_K, 0, 0, _RET_ALLOW), (_LD_ABS_W, 0, 0, _ARG0)]
    for family in refused_families:
        program += [(_JEQ_K, 0, 1, family), (_RET_K, 0, 0, deny)]
    program.append((_RET_K, 0, 0, _RET_ALLOW))
    return program


def install(unix_sockets: bool) -> None:
    """Put the filter on every thread of this process (`no_new_privs` first); OSError if the platform cannot."""
    machine = os.uname().machine
    if machine not in _SECCOMP_ARCHES:
        raise OSError(errno.ENOSYS, f"no seccomp filter for {machine} machines")
    arch, seccomp_call, socket_call = _SECCOMP_ARCHES[machine]
    instructions = program(arch, socket_call, unix_sockets, machine)
    filters = (_SockFilter * len(instructions))(*(_SockFilter(*instruction) for instruction in instructions))
    compiled = _SockFprog(len(instructions), filters)
    libc: Any = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(no_new_privs)")
    _check(
        libc.syscall(seccomp_call, _SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(compiled)),
        "seccomp",
    )


def _check(result: int, what: str) -> None:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
