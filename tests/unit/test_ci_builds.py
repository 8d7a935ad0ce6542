"""A test that needs what `.ci/run` builds in the background waits for it, and is told why when it is not there."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.ci_builds import TOOLS_ENV, TOOLS_WAIT_ENV, wait_for_build, wait_for_system_tools


def test_a_build_that_finishes_while_a_test_waits_is_used(tmp_path: Path) -> None:
    folder = tmp_path / ".ci-phoenix"
    folder.mkdir()
    threading.Timer(1.0, (folder / "ready").touch).start()
    started = time.monotonic()
    assert wait_for_build(folder, 30, "Phoenix") is None
    assert time.monotonic() - started >= 0.9  # it did wait for the build


def test_a_failed_build_is_named_at_once_and_one_not_ready_in_time_says_so(tmp_path: Path) -> None:
    folder = tmp_path / ".ci-enterprise-gateway"
    folder.mkdir()
    assert wait_for_build(folder, 0, "Gateway") == "Gateway is not built"
    assert wait_for_build(folder, 1, "Gateway") == "Gateway was not built within 1 s"
    (tmp_path / ".ci-enterprise-gateway.failed").touch()
    started = time.monotonic()
    assert wait_for_build(folder, 600, "Gateway") == "Gateway could not be built (see .ci-enterprise-gateway.log)"
    assert time.monotonic() - started < 1


def test_the_tools_the_background_install_lacks_are_read_once_it_is_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOOLS_ENV, raising=False)
    monkeypatch.setenv("FREEACT_SUB_MISSING_TOOLS", "chromium")
    assert wait_for_system_tools() == ["chromium"]  # no background install: the environment alone
    folder = tmp_path / ".ci-tools"
    folder.mkdir()
    (folder / "missing").write_text("npm acpx\n")
    monkeypatch.setenv(TOOLS_ENV, str(folder))
    monkeypatch.setenv(TOOLS_WAIT_ENV, "30")
    threading.Timer(1.0, (folder / "ready").touch).start()
    assert wait_for_system_tools() == ["chromium", "npm", "acpx"]
    monkeypatch.setenv(TOOLS_WAIT_ENV, "0")
    (folder / "ready").unlink()
    with pytest.raises(RuntimeError, match="the system tools is not built"):
        wait_for_system_tools()
