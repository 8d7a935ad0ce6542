"""Drive the real `freeact-sub` command in a pseudo-terminal and read what it shows.

`Terminal` keeps everything the program wrote; `text` is that output with terminal control
sequences removed, so assertions read like the screen. Searches move forward: `expect()`
returns the first match after the previous one.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pexpect
import psutil

from tests.cli_fork import cli_command, run_of

CONTROL = re.compile(
    r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]|\r"
)
AGENT = r"agent-[0-9a-f]{4,}"


def strip_control(raw: str) -> str:
    return CONTROL.sub("", raw)


def cli_env(**extra: str) -> dict[str, str]:
    """The environment for the command: no provider keys, no colour downgrades, prompt_toolkit without CPR."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FREEACT_SUB_") and not k.endswith("_API_KEY")}
    env.update(TERM="xterm-256color", PROMPT_TOOLKIT_NO_CPR="1", COLUMNS="200", LINES="60")
    env["COLORFGBG"] = "15;0"  # a dark terminal, said: no OSC 11 query (a pty would not answer it; 0.2 s per start)
    env["FREEACT_SUB_DEMO_CHUNK_DELAY"] = os.environ.get("FREEACT_SUB_DEMO_CHUNK_DELAY", "0.001")
    env.pop("NO_COLOR", None)
    env.update(extra)
    return env


class Terminal:
    """`freeact-sub` running in a pseudo-terminal of 200 columns (or `columns`)."""

    def __init__(self, *args: str, cwd: Path, env: dict[str, str] | None = None, columns: int = 200) -> None:
        command = cli_command(*args)
        self.child = pexpect.spawn(
            command[0],
            command[1:],
            cwd=str(cwd),
            env=env or cli_env(COLUMNS=str(columns)),
            dimensions=(60, columns),
            encoding="utf-8",
            codec_errors="replace",
        )
        self.raw = ""
        self._pos = 0
        self.ended = False
        self._text = ""
        self._text_of = 0
        """How much of `raw` `_text` was made from: it is stripped again only when more has come."""

    @property
    def text(self) -> str:
        if self._text_of != len(self.raw):
            self._text, self._text_of = strip_control(self.raw), len(self.raw)
        return self._text

    def _pump(self, timeout: float) -> None:
        try:
            self.raw += self.child.read_nonblocking(1 << 16, timeout=timeout)
        except pexpect.TIMEOUT:
            pass
        except pexpect.EOF:
            self.ended = True

    def expect(self, pattern: str, timeout: float = 90.0) -> re.Match[str]:
        """Wait for the regex `pattern` after the previous match; fail with the screen's tail if it does not come."""
        compiled = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            match = compiled.search(self.text, self._pos)
            if match:
                self._pos = match.end()
                return match
            if self.ended or time.monotonic() > deadline:
                tail = self.text[-3000:]
                raise AssertionError(
                    f"{pattern!r} did not appear{' (the program ended)' if self.ended else ''}:\n{tail}"
                )
            self._pump(0.1)

    def expect_started(self, timeout: float = 90.0) -> None:
        """Wait for the session's start: the prompt comes at once, the banner once the agent, its kernel and MCP
        servers are up (it ends with the keys), and the prompt again below it."""
        self.expect(r"you ›", timeout)
        self.expect(r"keys +Enter sends", timeout)
        self.expect(r"you ›", timeout)

    @property
    def position(self) -> int:
        """Where the next `expect()` starts searching."""
        return self._pos

    def wait_for(self, pattern: str, since: int = 0, timeout: float = 90.0) -> re.Match[str]:
        """Wait for `pattern` anywhere after `since`, without moving the search position."""
        position = self._pos
        try:
            self._pos = since
            return self.expect(pattern, timeout)
        finally:
            self._pos = position

    def send(self, keys: str) -> None:
        self.child.send(keys)

    def descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(run_of(self.child.pid)).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def wait_exit(self, timeout: float = 60.0) -> int:
        """Read to the end of output and return the exit status (128+N for signal N)."""
        deadline = time.monotonic() + timeout
        while not self.ended:
            if time.monotonic() > deadline:
                raise AssertionError(f"the program did not exit:\n{self.text[-2000:]}")
            self._pump(0.2)
        self.child.wait()
        self.child.close()
        if self.child.signalstatus is not None:
            return 128 + self.child.signalstatus
        return int(self.child.exitstatus or 0)

    def kill(self) -> None:
        if self.child.isalive():
            self.child.kill(9)
        self.child.close(force=True)


def processes_in(directory: Path) -> list[str]:
    """Processes anywhere on the machine whose working directory is inside `directory` (kernels, MCP servers)."""
    found = []
    for process in psutil.process_iter(["pid", "cwd", "cmdline"]):
        cwd = process.info.get("cwd")
        if cwd and Path(cwd).is_relative_to(directory):
            found.append(f"{process.info['pid']}: {' '.join(process.info.get('cmdline') or [])[:160]}")
    return found


def wait_until_gone(processes: list[psutil.Process], timeout: float = 15.0) -> list[psutil.Process]:
    """The processes still alive after waiting up to `timeout` seconds for them to end."""
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    return [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
