"""A sandbox per agent: the operating system limits what an agent's kernel may read, write and reach.

`SandboxProfile` says what is allowed (built-in: `workspace`, `offline`, `read-only`, `off`);
`effective()` picks the profile an agent runs under on this platform; `enforce` confines a
kernel process (forked or launched) or an MCP server to it before any of its code runs.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from . import kernel_folders
from .enforce import landlock_abi
from .profiles import BUILT_IN_PROFILES, DEFAULT_SECRETS, SandboxProfile, meet, profile_from
from .views import copy_on_write_problem

__all__ = [
    "BUILT_IN_PROFILES",
    "DEFAULT_PROFILE",
    "DEFAULT_SECRETS",
    "ENFORCE_SCRIPT",
    "SandboxProfile",
    "check_enforceable",
    "confined_command",
    "copy_on_write_problem",
    "effective",
    "meet",
    "platform_problem",
    "profile_from",
    "wrapped_command",
]

DEFAULT_PROFILE = "workspace"
ENFORCE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_confined.py")
"""Run as `python ENFORCE_SCRIPT PLAN_JSON -- COMMAND ARGS...` to start a command confined to a plan."""


_probing = threading.Lock()


def platform_problem() -> str | None:
    """Why this machine cannot enforce a sandbox, or None if it can (checked once per process: a caller that comes
    while another's check runs waits for its answer)."""
    with _probing:
        return _platform_problem()


@functools.cache
def _platform_problem() -> str | None:
    if not sys.platform.startswith("linux"):
        return f"sandboxes need Linux (this is {sys.platform})"
    if landlock_abi() < 1:
        return "this Linux kernel offers no Landlock (it needs Linux 5.13 or newer with Landlock enabled)"
    probe = {"deny": [], "write": [], "network": False, "scratch": "/"}
    try:
        subprocess.run([sys.executable, ENFORCE_SCRIPT, json.dumps(probe), "--", "true"],
                       check=True, capture_output=True, timeout=30)
    except subprocess.CalledProcessError as exc:
        reason = exc.stderr.decode(errors="replace").strip().removeprefix("freeact-sub sandbox: ")
        return f"this machine does not let a process confine itself ({reason or 'the probe failed'})"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the sandbox probe could not run ({exc})"
    return None


def check_enforceable(profile: SandboxProfile, *, gateway: bool = False) -> None:
    """Raise a `ConfigError` if `profile` is a sandbox this platform (or a gateway kernel) cannot enforce."""
    if profile.enforced and (problem := _problem(gateway)) is not None:
        raise ConfigError(
            f"sandbox: the profile {profile.name!r} cannot be enforced: {problem}. "
            "Set sandbox to 'off' to run without a sandbox."
        )


def effective(value: SandboxProfile | None, *, gateway: bool = False) -> SandboxProfile:
    """The profile an agent runs under: `value`, or the default when None.

    A profile asked for that this platform cannot enforce is a `ConfigError`; the default then
    falls back to `off`, with a `UserWarning` and a `note` saying why.
    """
    if value is not None:
        check_enforceable(value, gateway=gateway)
        return value
    problem = _problem(gateway)
    if problem is None:
        return BUILT_IN_PROFILES[DEFAULT_PROFILE]
    warnings.warn(f"freeact-sub runs kernels without a sandbox: {problem}", UserWarning, stacklevel=2)
    return BUILT_IN_PROFILES["off"].model_copy(update={"note": f"no sandbox: {problem}"})


def _problem(gateway: bool) -> str | None:
    if gateway:
        return "kernels on a gateway run where the gateway puts them; isolate them there"
    return platform_problem()


def confined_command(
    profile: SandboxProfile, command: list[str], working_dir: Path, homes: Iterable[str] = ()
) -> list[str]:
    """`command` confined to `profile` in `working_dir` (a stdio MCP server); ConfigError if it cannot be.

    Like a kernel, it sees none of the kernels' private folders.
    """
    check_enforceable(profile)
    plan = {**profile.plan(working_dir, homes), "private_root": kernel_folders.private_root(), "own": []}
    return wrapped_command(plan, command)


def wrapped_command(plan: dict[str, Any], command: list[str]) -> list[str]:
    """`command`, started confined to `plan` (for launched kernels and stdio MCP servers)."""
    return [sys.executable, ENFORCE_SCRIPT, json.dumps(plan), "--", *command]
