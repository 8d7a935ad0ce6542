"""A child process with asyncio streams on its stdin and stdout, made without asyncio's subprocess transport.

`asyncio.create_subprocess_exec` on Python 3.11 never returns when it is cancelled while it connects the
child's pipes: its clean-up waits for pipes that were never connected. `asyncio.run()` cancels every task at
exit, so a program that started an agent and then raised (without stopping it) hung there, its tree's
warm-up caught inside that call. Here the process is made synchronously (`subprocess.Popen`, a few
milliseconds) and only its pipes are connected to the loop; a cancellation at any await kills and reaps it.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Mapping, Sequence

__all__ = ["PipedProcess"]

_POLL_SECONDS = 0.02


class PipedProcess:
    """The subset of `asyncio.subprocess.Process` a long-lived helper process needs: `pid`, `returncode`,
    `stdin` (a `StreamWriter`), `stdout` (a `StreamReader`), `wait()` and `kill()`."""

    def __init__(self, popen: subprocess.Popen[bytes], stdin: asyncio.StreamWriter, stdout: asyncio.StreamReader):
        self._popen = popen
        self.stdin = stdin
        self.stdout = stdout

    @classmethod
    async def start(cls, argv: Sequence[str], env: Mapping[str, str]) -> PipedProcess:
        """Start `argv` in a session of its own (a Ctrl-C in the terminal does not reach it), stderr discarded."""
        popen = subprocess.Popen(  # noqa: ASYNC220 - on purpose: see the module's docstring
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True, env=dict(env),
        )
        assert popen.stdin is not None and popen.stdout is not None
        loop = asyncio.get_running_loop()
        try:
            stdout = asyncio.StreamReader()
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdout), popen.stdout)
            transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, popen.stdin)
            stdin = asyncio.StreamWriter(transport, protocol, None, loop)
        except BaseException:
            popen.kill()
            popen.wait()  # it was made a moment ago and is killed: this does not block
            raise
        return cls(popen, stdin, stdout)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        """The exit code once the process has ended (and been reaped), else None."""
        return self._popen.poll()

    async def wait(self) -> int:
        """Wait until the process ends; its exit code."""
        # polled: no child watcher is told of this process (that is asyncio's subprocess machinery)
        while (code := self._popen.poll()) is None:  # noqa: ASYNC110
            await asyncio.sleep(_POLL_SECONDS)
        return code

    def kill(self) -> None:
        """SIGKILL the process (nothing if it has ended)."""
        if self._popen.poll() is None:
            self._popen.kill()
