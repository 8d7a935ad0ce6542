"""`Kernel` against real IPython kernels: what only the local kernel does (forked kernels, late subscribers, its
environment, connection folders, shutdown). What both backends promise is in `test_kernel_contract.py`."""

from __future__ import annotations

import asyncio
import os
import queue
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psutil
import pytest
import pytest_asyncio
from jupyter_client import AsyncKernelClient

from freeact_sub.kernels.launcher import KernelZygote, kernel_environment
from freeact_sub.kernels.local import Kernel, KernelError
from tests.processes import is_gone

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kernel(tmp_path_factory: pytest.TempPathFactory):
    """One kernel shared by the tests that do not kill, restart or reconfigure it."""
    async with Kernel(working_dir=tmp_path_factory.mktemp("kernel-work")) as shared:
        yield shared


@pytest_asyncio.fixture(loop_scope="module")
async def zygote() -> AsyncIterator[KernelZygote]:
    """A started kernel zygote, closed after the test (its forked kernels with it)."""
    started = KernelZygote()
    await started.start()
    try:
        yield started
    finally:
        await started.close()


def _same_file(a: str | Path, b: str | Path) -> bool:
    return os.path.samefile(a, b)


# -- output ------------------------------------------------------------------------------------


async def test_a_subscriber_that_reads_late_still_gets_every_line_in_order(kernel: Kernel) -> None:
    await _assert_a_late_subscriber_gets_every_line(kernel)


async def test_a_forked_kernel_keeps_every_line_for_a_late_subscriber_too(zygote: KernelZygote, tmp_path: Path) -> None:
    async with Kernel(working_dir=tmp_path, launcher=zygote) as forked:
        assert psutil.Process(forked.pid).ppid() == zygote.pid
        await _assert_a_late_subscriber_gets_every_line(forked)


async def test_a_forked_kernel_ends_when_its_zygote_is_killed(zygote: KernelZygote, tmp_path: Path) -> None:
    # The zygote kills its kernels when the host goes; if the zygote itself dies abruptly, each
    # forked kernel's parent poller must end it instead of leaving an orphan behind.
    forked = Kernel(working_dir=tmp_path, launcher=zygote)
    await forked.start()
    pid = forked.pid
    assert pid is not None and zygote.pid is not None
    os.kill(zygote.pid, signal.SIGKILL)
    outlived = not await is_gone(pid, wait=10.0)
    if outlived:  # the orphan is no longer our child: end it by its PID so the failure leaks nothing
        os.kill(pid, signal.SIGKILL)
    assert not outlived, "a forked kernel outlived its killed zygote"
    await forked.shutdown(now=True)


async def test_a_fork_cancelled_before_the_zygote_answers_leaves_no_kernel(
    zygote: KernelZygote, tmp_path: Path
) -> None:
    # a subagent cancelled while its kernel is forked: once the cancellation is through, no kernel of it runs
    def running_kernels() -> list[int]:
        assert zygote.pid is not None
        return [child.pid for child in psutil.Process(zygote.pid).children()
                if child.status() != psutil.STATUS_ZOMBIE]

    for attempt in range(5):
        connection = str(tmp_path / f"connection-{attempt}.json")
        forking = asyncio.create_task(zygote.fork(["-f", connection], kernel_environment(), str(tmp_path), os.devnull))
        await asyncio.sleep(0)  # the request is written; the zygote's answer has not come yet
        forking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await forking
        assert running_kernels() == [], f"a cancelled fork's kernel still runs (attempt {attempt + 1})"


async def test_a_forked_kernel_is_fresh_and_takes_its_own_settings(zygote: KernelZygote, tmp_path: Path) -> None:
    # What a forked kernel inherits from the zygote is imports (and the zygote's frozen objects), never
    # another kernel's state: its own folder, environment and command line (read without traitlets'
    # parser: the in-memory history and the zygote as its parent must still be set), and nothing run yet.
    for name in ("one", "two"):
        folder = tmp_path / name
        async with Kernel(working_dir=folder, launcher=zygote, env={"FORK_TEST": name}) as forked:
            result = await forked.execute(
                "import gc, os\n"
                "ip = get_ipython()\n"
                "print(os.getcwd(), os.environ['FORK_TEST'], len(In), ip.history_manager.hist_file,"
                " ip.kernel.parent.parent_handle, gc.get_freeze_count() > 0,"
                " sorted(n for n in globals() if n in ('x', 'leftover')))\n"
                "leftover = 1"
            )
            assert result.status == "ok", result.text
            assert result.text.split() == [
                str(folder.resolve()), name, "2", ":memory:", str(zygote.pid), "True", "[]"
            ]


async def _assert_a_late_subscriber_gets_every_line(kernel: Kernel) -> None:
    # A deterministic slow reader: a second iopub subscriber with ZeroMQ's defaults that reads
    # nothing while the kernel prints. Its ZeroMQ thread stops taking messages once its own
    # queue is full, so everything else waits in the kernel's publisher; with ZeroMQ's default
    # send limit there (1000 messages) the kernel would drop the rest, as it does for our own
    # client when this process is starved of CPU.
    assert kernel._manager is not None
    slow = AsyncKernelClient(connection_file=kernel._manager.connection_file)
    slow.load_connection_file()
    slow.start_channels(shell=True, iopub=True, stdin=False, hb=False, control=False)
    try:
        # Subscribed once the status of one of its own requests reaches it. A status published before the
        # subscription took hold is lost (ZeroMQ's slow joiner), so the request is sent again each second.
        subscribed = False
        async with asyncio.timeout(30):
            while not subscribed:
                request = slow.kernel_info()
                try:
                    while True:
                        message = await slow.get_iopub_msg(timeout=1)
                        if message["parent_header"].get("msg_id") == request and message["msg_type"] == "status":
                            subscribed = True
                            break
                except queue.Empty:
                    continue
        result = await kernel.execute("for i in range(10_000):\n    print(f'late {i}', flush=True)")
        assert result.text.count("late ") == 10_000
        texts: list[str] = []
        while not texts or not texts[-1].endswith("late 9999\n"):
            try:
                message = await slow.get_iopub_msg(timeout=10)
            except queue.Empty:  # the rest was dropped
                break
            if message["msg_type"] == "stream":
                texts.append(message["content"]["text"])
        assert "".join(texts).splitlines() == [f"late {i}" for i in range(10_000)]
    finally:
        slow.stop_channels()


async def test_the_kernel_runs_in_its_working_directory_with_the_host_python(kernel: Kernel) -> None:
    result = await kernel.execute("import os, sys\nprint(os.getcwd())\nprint(sys.executable)")
    cwd, executable = result.text.splitlines()
    assert _same_file(cwd, kernel.working_dir)
    assert _same_file(executable, sys.executable)


# -- environment and connection ----------------------------------------------------------------


async def test_the_kernel_does_not_see_the_hosts_api_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-host-secret")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    async with Kernel(working_dir=tmp_path, env={"GRANTED": "yes"}) as kernel:
        result = await kernel.execute(
            "import os\n"
            "for name in ('OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'GRANTED', 'PATH', 'HOME', 'LC_ALL'):\n"
            "    print(name, '=', os.environ.get(name))"
        )
    seen = dict(line.split(" = ", 1) for line in result.text.splitlines())
    assert seen["OPENAI_API_KEY"] == "None"
    assert seen["ANTHROPIC_API_KEY"] == "None"
    assert seen["GRANTED"] == "yes"
    assert seen["PATH"] == os.environ["PATH"]
    assert seen["HOME"] == os.environ["HOME"]
    assert seen["LC_ALL"] == "C.UTF-8"
    assert "sk-host-secret" not in result.text


async def test_each_kernel_has_a_private_connection_folder_removed_at_shutdown(tmp_path: Path) -> None:
    first, second = Kernel(working_dir=tmp_path), Kernel(working_dir=tmp_path)
    await asyncio.gather(first.start(), second.start())
    try:
        folders = [Path(k._connection_dir) for k in (first, second)]  # type: ignore[arg-type]
        assert folders[0] != folders[1]
        for folder in folders:
            assert (folder / "connection.json").is_file()
            assert folder.stat().st_mode & 0o077 == 0  # only the owner may enter
        results = await asyncio.gather(first.execute("print('one')"), second.execute("print('two')"))
        assert [r.text for r in results] == ["one\n", "two\n"]
    finally:
        await asyncio.gather(first.shutdown(), second.shutdown())
    for folder in folders:
        assert not folder.exists()


async def test_a_killed_kernels_folder_is_released_behind_its_shutdown(
    zygote: KernelZygote, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`shutdown(now=True)` (a child's end, which frees its slot) returns once the process is gone; what the kernel
    held (its folder, a sandbox's guard) is released in a thread behind it, and `released()` waits for that."""
    import threading

    from freeact_sub.kernels.local import released
    from freeact_sub.sandbox import kernel_folders

    slow_disk = threading.Event()
    remove = kernel_folders.remove

    def remove_slowly(folder: str) -> None:
        slow_disk.wait(5)
        remove(folder)

    monkeypatch.setattr(kernel_folders, "remove", remove_slowly)
    kernel = Kernel(working_dir=tmp_path, launcher=zygote)
    await kernel.start()
    folder, pid = Path(kernel._connection_dir), kernel.pid  # type: ignore[arg-type]
    try:
        await asyncio.wait_for(kernel.shutdown(now=True), 2.5)
        assert await is_gone(pid, wait=0.1) and await asyncio.to_thread(folder.exists)
        releasing = asyncio.ensure_future(released())
        await asyncio.sleep(0.05)
        assert not releasing.done(), "released() waits for the folder's removal"
    finally:
        slow_disk.set()
    await asyncio.wait_for(releasing, 5)
    assert not await asyncio.to_thread(folder.exists)


_HOST = """
import asyncio, os, signal, sys
from freeact_sub.kernels.local import Kernel

async def main():
    kernel = Kernel(working_dir=sys.argv[2])
    await kernel.start()
    print(kernel._connection_dir, kernel.pid, flush=True)
    if sys.argv[1] == "die":
        os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())  # never shut down: what a notebook kernel restart does to its agents
"""


async def _host(how: str, tmp_path: Path) -> tuple[Path, int]:
    """A host process that starts a kernel and ends without shutting it down; its folder and kernel PID."""
    temp = tmp_path / "tmp"
    temp.mkdir(exist_ok=True)
    host = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _HOST, how, str(tmp_path),
        stdout=asyncio.subprocess.PIPE, env={**os.environ, "TMPDIR": str(temp)},
    )  # fmt: skip
    out, _ = await host.communicate()
    folder, pid = out.decode().split()
    return Path(folder), int(pid)


@pytest.fixture
def short_tmp_path() -> Iterator[Path]:
    """A temporary folder with a short path: a kernel's ipc socket path must fit in 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="fs-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_connection_folders_of_a_host_that_exits_are_removed_at_exit(short_tmp_path: Path) -> None:
    tmp_path = short_tmp_path
    folder, kernel_pid = await _host("exit", tmp_path)
    assert folder.parent.parent == tmp_path / "tmp" and folder.name.startswith("kernel-")
    assert not folder.exists()
    assert await is_gone(kernel_pid, wait=10)


async def test_connection_folders_of_a_dead_host_are_swept_and_no_others(short_tmp_path: Path) -> None:
    tmp_path = short_tmp_path
    from freeact_sub.sandbox import kernel_folders

    folder, kernel_pid = await _host("die", tmp_path)
    assert (folder / "connection.json").is_file()  # left behind, HMAC key and all
    assert await is_gone(kernel_pid, wait=10)
    live = kernel_folders.create()  # this process's own: its owner is alive
    root = folder.parent  # the dead host's private root, `$TMPDIR/freeact-sub-<uid>`
    assert root.name == f"freeact-sub-{os.getuid()}" and (root.stat().st_mode & 0o777) == 0o700
    unowned = root / "kernel-unowned"  # no owner recorded: not ours to judge
    unowned.mkdir()
    try:
        assert kernel_folders.sweep(str(root)) == [str(folder)]
        assert [p.exists() for p in (folder, unowned, Path(live))] == [False, True, True]
        assert (Path(live) / "owner").read_text() == str(os.getpid())
    finally:
        kernel_folders.remove(live)


async def test_an_empty_unowned_folder_is_swept_only_after_a_minute(tmp_path: Path) -> None:
    """What a removal leaves when a dying kernel's socket file comes and goes during it."""
    from freeact_sub.sandbox import kernel_folders

    root = tmp_path / "tmp"
    root.mkdir()
    old, new, kept = (root / f"freeact-sub-kernel-{name}" for name in ("old", "new", "kept"))
    for folder in (old, new, kept):
        folder.mkdir()
    (kept / "connection.json").write_text("{}")  # has content but no owner: not ours to judge
    for folder in (old, kept):
        os.utime(folder, (time.time() - 120, time.time() - 120))
    assert kernel_folders.sweep(str(root)) == [str(old)]
    assert [p.exists() for p in (old, new, kept)] == [False, True, True]


async def test_what_a_kernel_made_after_its_folder_was_removed_is_swept_when_nobody_listens() -> None:
    """A kernel forked while its start was cancelled can bind its sockets and make `ipython/` in a removed folder."""
    import shutil
    import socket
    import tempfile

    from freeact_sub.sandbox import kernel_folders

    # not under `tmp_path`: with this test's long name in it, a socket's path could pass the 108 bytes AF_UNIX allows
    root = Path(tempfile.mkdtemp(prefix="ks-"))
    try:
        dead, live = root / "freeact-sub-kernel-dead", root / "freeact-sub-kernel-live"
        for folder in (dead, live):
            (folder / "ipython" / "profile_default").mkdir(parents=True)
        logged = root / "freeact-sub-kernel-logged"  # all that is left: the log it opened (seen after a suite run)
        logged.mkdir()
        (logged / "kernel.log").write_text("")
        os.utime(logged, (time.time() - 120, time.time() - 120))
        with socket.socket(socket.AF_UNIX) as gone:
            gone.bind(str(dead / "socket-1"))  # bound, then closed: nobody listens on it any more
        with socket.socket(socket.AF_UNIX) as listening:
            listening.bind(str(live / "socket-1"))
            listening.listen()
            for folder in (dead, live):
                os.utime(folder, (time.time() - 120, time.time() - 120))
            assert kernel_folders.sweep(str(root)) == [str(dead), str(logged)]
            assert live.exists()
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- timeouts, interrupts, cancellation --------------------------------------------------------


async def test_a_shell_command_past_the_timeout_is_interrupted(kernel: Kernel) -> None:
    result = await kernel.execute("!sleep 600", timeout=1)
    assert result.status == "timeout"
    assert (await kernel.execute("print('next')")).text == "next\n"


# -- deaths, restarts, reset -------------------------------------------------------------------


async def test_reset_waits_for_a_running_cell(tmp_path: Path) -> None:
    async with Kernel(working_dir=tmp_path) as kernel:
        running = asyncio.Event()

        def on_output(text: str) -> None:
            if "started" in text:
                running.set()

        code = "import time\nprint('started', flush=True)\ntime.sleep(0.5)\nprint('finished')"
        cell = asyncio.create_task(kernel.execute(code, on_output=on_output))
        await asyncio.wait_for(running.wait(), 30)
        await kernel.reset()  # a restart now would kill the cell: it must wait for it
        result = await cell
        assert result.status == "ok"
        assert result.text == "started\nfinished\n"
        assert kernel.restarts == 1


# -- lifecycle ---------------------------------------------------------------------------------


async def test_shutdown_ends_the_process(tmp_path: Path) -> None:
    kernel = Kernel(working_dir=tmp_path)
    await kernel.start()
    pid = kernel.pid
    assert pid is not None and psutil.pid_exists(pid)
    await kernel.shutdown()
    assert not kernel.started
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    await kernel.shutdown()  # a second shutdown is harmless


async def test_a_shutdown_makes_no_channel_the_kernel_never_used(zygote: KernelZygote, tmp_path: Path) -> None:
    # jupyter_client's stop_channels looks at all five channels through properties that make each missing one
    # (a socket connected only to be closed); a kernel here uses the shell and iopub channels alone
    kernel = Kernel(working_dir=tmp_path, launcher=zygote)
    await kernel.start()
    client = kernel._client
    assert (await kernel.execute("1 + 1")).text.strip() == "2"
    await kernel.shutdown(now=True)
    assert client._shell_channel is not None and client._iopub_channel is not None
    assert (client._stdin_channel, client._hb_channel, client._control_channel) == (None, None, None)
    assert not client.channels_running


async def test_shutdown_ends_processes_the_kernel_started(tmp_path: Path) -> None:
    kernel = Kernel(working_dir=tmp_path)
    await kernel.start()
    result = await kernel.execute("import subprocess\nprint(subprocess.Popen(['sleep', '600']).pid)")
    child = int(result.text)
    assert psutil.Process(child).is_running()
    await kernel.shutdown()
    for _ in range(50):
        if not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE:
            break
        await asyncio.sleep(0.1)
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


async def test_shutdown_forces_a_kernel_that_does_not_exit(tmp_path: Path) -> None:
    kernel = Kernel(working_dir=tmp_path)
    await kernel.start()
    pid = kernel.pid
    assert pid is not None
    # the kernel hangs on its way out: the graceful request alone cannot end it
    await kernel.execute("import atexit, time\natexit.register(time.sleep, 600)")
    await kernel.shutdown()
    process_gone = not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert process_gone


async def test_execute_on_a_stopped_kernel_raises(tmp_path: Path) -> None:
    kernel = Kernel(working_dir=tmp_path)
    with pytest.raises(KernelError, match="not running"):
        await kernel.execute("1")


async def test_a_kernel_that_cannot_start_raises_kernel_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    kernel = Kernel(working_dir=blocker / "sub")
    with pytest.raises(KernelError, match="did not start"):
        await kernel.start()
    assert not kernel.started
    assert kernel._connection_dir is None  # the private folder is not left behind


async def test_a_dead_hosts_code_tools_socket_folder_is_swept_too(tmp_path: Path) -> None:
    from freeact_sub.sandbox import kernel_folders

    root = tmp_path / "tmp"
    root.mkdir()
    dead = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await dead.wait()
    for prefix, owner in (("freeact-sub-tools-dead", dead.pid), ("freeact-sub-tools-live", os.getpid())):
        folder = root / prefix
        folder.mkdir()
        (folder / "owner").write_text(str(owner))
        (folder / "tools.sock").write_text("")
    assert kernel_folders.sweep(str(root)) == [str(root / "freeact-sub-tools-dead")]
    assert (root / "freeact-sub-tools-live").exists()


async def test_an_older_versions_code_tools_folder_is_swept_once_nobody_listens_on_its_socket(
    short_tmp_path: Path,
) -> None:
    import socket

    from freeact_sub.sandbox import kernel_folders

    root = short_tmp_path / "t"  # a socket's path must fit in 107 bytes
    root.mkdir()
    dead, live = root / "freeact-sub-tools-dead", root / "freeact-sub-tools-live"
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        for folder in (dead, live):  # no owner file: written by an older version
            folder.mkdir()
        closed = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        closed.bind(str(dead / "tools.sock"))
        closed.close()  # its server is gone: the socket file stays, connecting is refused
        listening.bind(str(live / "tools.sock"))
        listening.listen(1)
        for folder in (dead, live):
            os.utime(folder, (time.time() - 120, time.time() - 120))
        assert kernel_folders.sweep(str(root)) == [str(dead)]
        assert live.exists()
    finally:
        listening.close()


async def test_set_up_sent_with_the_next_cell_runs_before_it_and_after_every_restart(tmp_path: Path) -> None:
    ran = tmp_path / "set-up-ran"
    set_up = f"import pathlib\npathlib.Path({str(ran)!r}).open('a').write('x')\nprepared = 41"
    async with Kernel(working_dir=tmp_path) as kernel:
        await kernel.run_at_start(set_up, wait=False)
        await asyncio.sleep(0.3)
        assert not ran.exists()  # nothing is sent before a cell needs it
        result = await kernel.execute("print(prepared + 1)")
        assert result.text == "42\n" and result.status == "ok"
        assert ran.read_text() == "x"
        await kernel.execute("print('again')")
        assert ran.read_text() == "x"  # once per kernel process
        history = await kernel.execute("print(len(In), repr(In[1]))")
        assert history.text == "4 'print(prepared + 1)'\n"  # the set-up is not in the history (In[0] is empty)
        await kernel.reset()
        assert ran.read_text() == "xx"  # a restarted kernel gets it at once, before any cell
        assert (await kernel.execute("print(prepared)")).text == "41\n"


async def test_a_start_cancelled_while_its_folder_and_guard_are_made_leaves_neither(tmp_path: Path) -> None:
    """`Kernel.start` makes the folder (and a sandbox's guard) in a worker thread: a start cancelled meanwhile waits
    for the thread and removes what it made, so no folder (with its key) stays behind."""
    from freeact_sub.sandbox import kernel_folders

    before = set(kernel_folders._live)
    kernel = Kernel(working_dir=tmp_path)
    starting = asyncio.create_task(kernel.start())
    await asyncio.sleep(0)  # the thread is under way
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    await asyncio.sleep(0.5)  # a thread left running would have made its folder by now
    assert not kernel.started and kernel.tools_socket is None
    made = set(kernel_folders._live) - before
    assert made == set(), f"folders left behind: {made}"
    assert kernel.pid is None
