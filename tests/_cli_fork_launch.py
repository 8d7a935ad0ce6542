"""Stands in for a `freeact-sub` run in the tests: the run itself is forked by the tests' fork server.

    python -S tests/_cli_fork_launch.py SOCKET MODULE ARG...
    python -S tests/_cli_fork_launch.py SOCKET SCRIPT.py ARG...

It hands the server its standard streams, working folder, environment, MODULE (or SCRIPT) and ARGs, then passes on
every signal it gets to the run, and ends as the run ended: with its exit code, or killed by the same signal. So a test
that starts it sees what it would see of `python -m MODULE ARG...` (or `python SCRIPT.py ARG...`). On a terminal
(pexpect's pseudo-terminal), the run becomes the session's leader on it, as the command would be, and this process
gives it up. Where a fork could not be like a fresh interpreter (a terminal on some standard streams only, other
PYTHON*, LD_* or locale variables) or the server is not there, it becomes exactly that command (`exec`). Standard
library only, run with `-S`: it starts in milliseconds.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import sys
import termios

_PASSED_ON = (
    signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGWINCH,
)


def main(path: str, module: str, args: list[str]) -> None:
    def become_the_command() -> None:
        run = [module] if module.endswith(".py") else ["-m", module]
        os.execv(sys.executable, [sys.executable, *run, *args])

    terminal = os.isatty(0)
    if terminal:
        if not (os.isatty(1) and os.isatty(2) and os.getsid(0) == os.getpid()):
            become_the_command()
        # The run becomes the session's leader on our terminal (as pexpect makes the command), so we give it up;
        # giving it up hangs up our own process group, that is us.
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        fcntl.ioctl(0, termios.TIOCNOTTY)
    elif os.isatty(1) or os.isatty(2):
        become_the_command()
    try:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        server.connect(path)
        request = {"module": module, "terminal": terminal, "argv": args, "cwd": os.getcwd(), "env": dict(os.environ)}
        socket.send_fds(server, [json.dumps(request).encode()], [0, 1, 2])
        reply = json.loads(server.recv(65536))
    except (OSError, ValueError):
        become_the_command()
    if "fallback" in reply:
        become_the_command()
    run = reply["pid"]
    with open(os.path.join(os.path.dirname(path), f"run-of-{os.getpid()}"), "w") as note:  # for `cli_fork.run_of`
        note.write(str(run))

    def pass_on(received: int, frame: object) -> None:
        try:
            os.kill(run, received)
        except ProcessLookupError:
            pass  # the run has just ended: its status is on the way

    for signum in _PASSED_ON:
        signal.signal(signum, pass_on)
    # The run holds the streams now: whoever reads our stdout sees its end when the run's copy closes, not ours.
    quiet = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(quiet, fd)
    answer = server.recv(65536)
    if not answer:  # the server is gone, and its runs with it
        os._exit(1)
    status = json.loads(answer)["status"]
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    os._exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
