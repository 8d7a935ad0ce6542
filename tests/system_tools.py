"""System tools some tests need (Chromium, node, npm): skipped with a reason when `.ci/run` could not install them.

`.ci/run` installs each missing tool on its own and lists the ones it could not get in
`FREEACT_SUB_MISSING_TOOLS`. In CI a tool that is missing *without* being listed there is a
failure (the install step forgot it); elsewhere the test is skipped and says what to install.
"""

from __future__ import annotations

import os
import shutil

import pytest


def require(command: str, purpose: str, install_hint: str) -> str:
    """The path of `command`, or skip (or, in CI, fail) the calling test with a reason that names it."""
    path = shutil.which(command)
    if path is not None:
        return path
    message = f"'{command}' is missing, so {purpose} cannot run: {install_hint}"
    reported_missing = os.environ.get("FREEACT_SUB_MISSING_TOOLS", "").split()
    if os.environ.get("CI") and command not in reported_missing:
        pytest.fail(message + " (.ci/run should have installed it or said why not)")
    pytest.skip(message)
