"""System tools some tests need (Chromium, node, npm): skipped with a reason when `.ci/run` could not install them.

`.ci/run` installs each missing tool on its own and lists the ones it could not get (`tests/ci_builds.py`: it does
so while the tests run, and a test that needs a tool waits for that install). In CI a tool that is missing *without*
being listed there is a failure (the install step forgot it); elsewhere the test is skipped and says what to install.
"""

from __future__ import annotations

import os
import shutil

import pytest

from tests.ci_builds import wait_for_system_tools


def require(command: str, purpose: str, install_hint: str) -> str:
    """The path of `command`, or skip (or, in CI, fail) the calling test with a reason that names it."""
    path = shutil.which(command)
    if path is not None:
        return path
    reported_missing = wait_for_system_tools()
    if (path := shutil.which(command)) is not None:  # installed while this test waited
        return path
    message = f"'{command}' is missing, so {purpose} cannot run: {install_hint}"
    if os.environ.get("CI") and command not in reported_missing:
        pytest.fail(message + " (.ci/run should have installed it or said why not)")
    pytest.skip(message)
