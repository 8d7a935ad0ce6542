"""Whatever ends `freeact-sub` (a signal, a closed terminal, a kill), no kernel or MCP server is left behind."""

from __future__ import annotations

import os
import re
import signal
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from terminal_driver import AGENT, Terminal, processes_in, wait_until_gone

pytestmark = pytest.mark.timeout(300)


def _running_subagents(workdir: Path) -> Terminal:
    """The auto-approved tour, once its subagents have started and one of them is running a cell."""
    term = Terminal("--demo", "--auto-approve", cwd=workdir)
    term.expect_started()
    assert _demo_server(term) == ["/v1/chat/completions", "/v1/messages"], "the demo server answers both protocols"
    term.send("show me what you can do\r")
    term.expect(rf"started {AGENT} +Count the prime")
    term.expect(rf"{AGENT} +│ (checking part 1|batch 1)")
    return term


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_every_agent_and_exits(workdir: Path, signum: int) -> None:
    term = _running_subagents(workdir)
    try:
        started = term.descendants()
        assert len(started) >= 4  # kernels of the main agent and the subagents, and their MCP servers
        os.kill(term.child.pid, signum)
        assert term.wait_exit() == 128 + signum
    finally:
        term.kill()
    assert wait_until_gone(started) == []
    assert processes_in(workdir) == []
    assert _demo_server(term) == [], "the demo model server (both protocols) ended with the session"


def _demo_server(term: Terminal) -> list[str]:
    """The model endpoints (OpenAI, Anthropic) on which the demo server the banner names answers."""
    url = re.search(r"scripted demo model, offline, at (http://127\.0\.0\.1:\d+)/v1", term.text)
    assert url, "the banner names the demo server"
    answered = []
    for path in ("/v1/chat/completions", "/v1/messages"):
        request = urllib.request.Request(url.group(1) + path, data=b"{}", headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(request, timeout=5)
        except urllib.error.HTTPError:  # a 400 for the empty body: it is listening
            answered.append(path)
        except urllib.error.URLError:
            continue
    return answered


def test_a_killed_session_leaves_no_kernel_or_mcp_server(workdir: Path) -> None:
    """SIGKILL cannot be handled: kernels notice their parent is gone, MCP servers see their stdin close."""
    term = _running_subagents(workdir)
    try:
        started = term.descendants()
        assert len(started) >= 4
        term.child.kill(signal.SIGKILL)
        term.wait_exit()
    finally:
        term.kill()
    assert wait_until_gone(started, timeout=30) == []
    assert processes_in(workdir) == []
