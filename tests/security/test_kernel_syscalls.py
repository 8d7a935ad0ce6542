"""A confined kernel has no keyring of the host's and makes no nested user namespace.

A cell under `workspace` calls `keyctl` (to read the session keyring it would otherwise share with the host),
`add_key`, and, from a single-threaded process it starts (the kernel itself has threads, which the kernel
refuses anyway), `unshare(CLONE_NEWUSER)`; all are refused with EPERM. Threads and processes still start.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from freeact_sub.kernels.local import Kernel
from freeact_sub.sandbox import BUILT_IN_PROFILES, platform_problem

pytestmark = pytest.mark.skipif(platform_problem() is not None, reason=f"no sandbox here: {platform_problem()}")

PROBE = r'''
import ctypes, json, os, platform, subprocess, sys, threading
calls = {"x86_64": {"keyctl": 250, "add_key": 248}, "aarch64": {"keyctl": 219, "add_key": 217}}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
found = {}
KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING = 0, -3
result = libc.syscall(calls["keyctl"], KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0)
found["keyctl"] = "ok" if result >= 0 else f"errno {ctypes.get_errno()}"
result = libc.syscall(calls["add_key"], b"user", b"planted", b"x", 1, KEY_SPEC_SESSION_KEYRING)
found["add_key"] = "ok" if result >= 0 else f"errno {ctypes.get_errno()}"
child = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print("ok" if libc.unshare(0x10000000) == 0 else f"errno {ctypes.get_errno()}")
"""
found["unshare_user"] = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True).stdout.strip()
box = []
thread = threading.Thread(target=lambda: box.append("ok")); thread.start(); thread.join()
found["thread"] = box[0]
found["process"] = subprocess.run(["/bin/sh", "-c", "echo ok"], capture_output=True, text=True).stdout.strip()
print("PROBE" + json.dumps(found))
'''


async def test_no_keyring_calls_and_no_nested_user_namespace(tmp_path: Path) -> None:
    async with Kernel(working_dir=tmp_path, sandbox=BUILT_IN_PROFILES["workspace"].plan(tmp_path)) as kernel:
        result = await kernel.execute(PROBE, timeout=60)
    line = next((line for line in result.text.splitlines() if line.startswith("PROBE")), None)
    assert line is not None, result.text
    found = json.loads(line.removeprefix("PROBE"))
    assert found == {
        "keyctl": "errno 1",
        "add_key": "errno 1",
        "unshare_user": "errno 1",
        "thread": "ok",
        "process": "ok",
    }
