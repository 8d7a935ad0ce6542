"""What both kernel backends promise, each against the real thing: the local `Kernel` (an IPython kernel
this process starts) and `GatewayKernel` (a kernel on a real Jupyter Kernel Gateway on 127.0.0.1).

Output streams and arrives whole and in order, images are saved on the host, state is kept between
cells and cells run one after another, timeouts and cancellation interrupt, a kernel that dies or
ignores an interrupt is restarted and says that state was lost, `reset()` gives a clean kernel.
What only one backend does stays in `test_kernel.py` and `test_kernel_gateway.py`.
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import struct
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from freeact_sub.config.agent_config import KernelGatewayConfig
from freeact_sub.kernels.gateway import GatewayKernel
from freeact_sub.kernels.local import Kernel
from freeact_sub.kernels.zygote import process_zygote
from tests.gateway_server import TOKEN_ENV, token_gateway
from tests.processes import is_gone

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass
class Backend:
    """One kernel backend: how to make a fresh kernel of it."""

    name: str
    make: Callable[..., Any]
    """`make(working_dir=..., images_dir=..., label=...)`: a kernel not started yet (use `async with`)."""

    @property
    def local(self) -> bool:
        return self.name == "local"


@pytest.fixture(scope="module", params=["local", "gateway"])
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Each backend in turn; the gateway (a server process) is started only for its own tests."""
    if request.param == "local":
        # forked by the process's zygote, as an agent tree's kernels are (a launch costs about ten times a fork's CPU;
        # `test_kernel.py` covers launched kernels)
        yield Backend("local", lambda **settings: Kernel(launcher=process_zygote(), **settings))
        return
    with token_gateway(tmp_path_factory.mktemp("gateway")) as server:
        config = KernelGatewayConfig.model_validate({"url": server.url, "token_env": TOKEN_ENV})
        yield Backend("gateway", lambda **settings: GatewayKernel(config, **settings))


@pytest_asyncio.fixture(scope="module", loop_scope="module", autouse=True)
async def forking_zygote() -> None:
    """The process's zygote, running, for the local backend's kernels."""
    await process_zygote().start()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kernel(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    """One kernel per backend, shared by the tests that do not kill, restart or reconfigure it."""
    async with backend.make(working_dir=tmp_path_factory.mktemp("kernel-work")) as shared:
        yield shared


async def pid_of(kernel: Any) -> int:
    """The process id of the kernel, as the kernel itself says (a gateway's kernel runs elsewhere)."""
    return int((await kernel.execute("import os\nprint(os.getpid())")).text)


def png(width: int = 2, height: int = 2) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


# -- output ------------------------------------------------------------------------------------


async def test_output_streams_while_the_cell_runs(kernel: Any, tmp_path: Path) -> None:
    # The cell waits for a file that only the output callback creates: it can end only if its
    # first output reached us while it was still running.
    flag = tmp_path / "go"
    wait = f"while not os.path.exists({str(flag)!r}):\n    time.sleep(0.01)\n"
    code = "import os, time\nprint('waiting', flush=True)\n" + wait + "print('released')"
    seen: list[str] = []

    def on_output(text: str) -> None:
        seen.append(text)
        if "waiting" in text:
            flag.touch()

    result = await kernel.execute(code, timeout=30, on_output=on_output)
    assert result.status == "ok", result.text
    assert result.text == "waiting\nreleased\n"
    assert "".join(seen) == result.text


async def test_async_output_callbacks_are_awaited(kernel: Any) -> None:
    seen: list[str] = []

    async def on_output(text: str) -> None:
        await asyncio.sleep(0)
        seen.append(text)

    result = await kernel.execute("print('a', flush=True)\nprint('b')", on_output=on_output)
    assert "".join(seen) == result.text == "a\nb\n"


async def test_stdout_stderr_results_and_display_data(kernel: Any) -> None:
    code = (
        "import sys\n"
        "from IPython.display import display\n"
        "print('to stdout', flush=True)\n"
        "print('to stderr', file=sys.stderr, flush=True)\n"
        "display('displayed')\n"
        "6 * 7"
    )
    result = await kernel.execute(code)
    assert result.status == "ok"
    assert result.text == "to stdout\nto stderr\n'displayed'\n42\n"


async def test_a_cell_that_raises_gives_a_readable_traceback(kernel: Any) -> None:
    result = await kernel.execute("def f():\n    return 1 / 0\n\nprint('before')\nf()")
    assert result.status == "error"
    assert result.text.startswith("before\n")
    assert "ZeroDivisionError" in result.text
    assert "return 1 / 0" in result.text  # the failing line is shown
    assert "\x1b[" not in result.text  # no terminal colour codes


async def test_a_syntax_error_is_reported(kernel: Any) -> None:
    result = await kernel.execute("def broken(:\n    pass")
    assert result.status == "error"
    assert "SyntaxError" in result.text


async def test_the_kernel_keeps_state_and_runs_cells_one_after_another(kernel: Any) -> None:
    await kernel.execute("kept = []")
    code = "import time\nkept.append('{0}-start')\ntime.sleep(0.2)\nkept.append('{0}-end')\nprint('{0}')"
    results = await asyncio.gather(*(kernel.execute(code.format(name)) for name in "abc"))
    assert [r.text for r in results] == ["a\n", "b\n", "c\n"]
    order = await kernel.execute("print(' '.join(kept))")
    assert order.text == "a-start a-end b-start b-end c-start c-end\n"


async def test_images_are_saved_on_the_host_to_files_named_in_the_output(backend: Backend, tmp_path: Path) -> None:
    image = png()
    images = tmp_path / "images"
    async with backend.make(working_dir=tmp_path, images_dir=images, label="agent-img") as kernel:
        code = (
            "import base64\n"
            "from IPython.display import Image, display\n"
            f"data = base64.b64decode({base64.b64encode(image).decode()!r})\n"
            "display(Image(data=data))\n"
            "Image(data=data)"
        )
        result = await kernel.execute(code)
    assert result.status == "ok", result.text
    assert len(result.images) == 2
    for path in result.images:
        assert path.parent == images
        assert path.name.startswith("agent-img-")
        assert path.read_bytes() == image
        assert f"[image saved: {path}]" in result.text
    assert "base64" not in result.text and "iVBOR" not in result.text


async def test_output_printed_right_before_the_cell_ends_is_all_there(kernel: Any) -> None:
    # execute_reply may overtake the last iopub output; reading until status idle must not lose it
    for attempt in range(30):
        code = (
            "import sys\n"
            "print('x' * 5000)\n"
            f"sys.stderr.write('err-{attempt}')\n"
            f"sys.stdout.write('tail-{attempt}')"
        )
        result = await kernel.execute(code)
        assert result.text.count("x") == 5000
        assert f"err-{attempt}" in result.text
        assert f"tail-{attempt}" in result.text


async def test_ten_thousand_flushed_lines_all_arrive_in_order(kernel: Any) -> None:
    chunks: list[str] = []
    result = await kernel.execute(
        "for i in range(10_000):\n    print(f'line {i}', flush=True)", on_output=chunks.append
    )
    assert result.text.splitlines() == [f"line {i}" for i in range(10_000)]
    assert "".join(chunks) == result.text


async def test_a_cell_asking_for_input_fails_instead_of_hanging(kernel: Any) -> None:
    result = await kernel.execute("input('name? ')", timeout=60)
    assert result.status == "error"
    assert "StdinNotImplementedError" in result.text


# -- timeouts, interrupts, cancellation --------------------------------------------------------


async def test_a_cell_past_its_timeout_is_interrupted_and_the_kernel_stays_usable(kernel: Any) -> None:
    await kernel.execute("before_timeout = 'kept'")
    pid = await pid_of(kernel)
    result = await kernel.execute("print('started', flush=True)\nwhile True:\n    pass", timeout=1)
    assert result.status == "timeout"
    assert result.text.startswith("started\n")
    assert "KeyboardInterrupt" in result.text
    assert "timed out after 1 s" in result.text
    assert (await kernel.execute("print(before_timeout)")).text == "kept\n"  # an interrupt, not a restart
    assert await pid_of(kernel) == pid


async def test_a_cell_that_ignores_the_interrupt_gets_a_restarted_kernel(backend: Backend, tmp_path: Path) -> None:
    async with backend.make(working_dir=tmp_path) as kernel:
        pid = await pid_of(kernel)
        code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.05)"
        result = await kernel.execute(code, timeout=0.5)
        assert result.status == "timeout"
        assert "did not stop" in result.text and "state was lost" in result.text
        # a local kernel is ended before the restart; a gateway's, by the gateway, soon after
        assert await is_gone(pid, wait=0 if backend.local else 5)
        assert (await kernel.execute("print('alive')")).text == "alive\n"
        assert await pid_of(kernel) != pid


async def test_cancelling_execute_interrupts_the_cell(kernel: Any) -> None:
    await kernel.execute("before_cancel = 'kept'")
    started = asyncio.Event()

    def on_output(text: str) -> None:
        if "running" in text:
            started.set()

    task = asyncio.create_task(
        kernel.execute("import time\nprint('running', flush=True)\ntime.sleep(600)", on_output=on_output)
    )
    await asyncio.wait_for(started.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await kernel.execute("print(before_cancel)")).text == "kept\n"


# -- deaths, restarts, reset -------------------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    ["import os\nos._exit(1)", "import ctypes\nctypes.string_at(0)"],
    ids=["os._exit", "segfault"],
)
async def test_a_kernel_that_dies_in_a_cell_is_restarted_and_says_state_was_lost(
    backend: Backend, code: str, tmp_path: Path
) -> None:
    async with backend.make(working_dir=tmp_path) as kernel:
        await kernel.execute("doomed = 1")
        pid = await pid_of(kernel)
        result = await kernel.execute(f"print('about to die', flush=True)\n{code}")
        assert result.status == "kernel_died"
        assert "died" in result.text
        assert "state" in result.text and "lost" in result.text
        assert kernel.restarts == 1  # and the cell that ended its kernel was not sent to the new one
        after = await kernel.execute("print('doomed' in globals())")
        assert (after.status, after.text) == ("ok", "False\n")
        assert await pid_of(kernel) != pid


async def test_a_kernel_killed_between_cells_is_restarted_and_the_next_cell_says_so(
    backend: Backend, tmp_path: Path
) -> None:
    async with backend.make(working_dir=tmp_path) as kernel:
        await kernel.execute("lost = 1")
        pid = await pid_of(kernel)
        os.kill(pid, signal.SIGKILL)
        assert await is_gone(pid)
        seen: list[str] = []
        result = await kernel.execute("print('fresh')", on_output=seen.append)
        assert "restarted" in result.text and "lost" in result.text
        assert result.text.count("fresh") <= 1  # the cell is never sent twice
        # Whether the backend knew of the death before the request was sent decides which honest answer this
        # is: a gateway's news of it may come later, and a local kernel's process counts as ended only once
        # every one of its threads has (its main thread shows as a zombie a moment before). Found dead before
        # the cell went out, it "may not have run"; found dead after, it "died while running" the cell.
        if result.status == "ok":
            assert result.text.endswith("fresh\n")
        else:
            assert result.status == "kernel_died"
            assert ("may not have run" in result.text or "died while running" in result.text), result.text
            assert "fresh" not in result.text
        assert kernel.restarts == 1
        assert "".join(seen) == result.text
        assert (await kernel.execute("print('lost' in globals())")).text == "False\n"
        assert await pid_of(kernel) != pid


async def test_reset_gives_a_clean_kernel(backend: Backend, tmp_path: Path) -> None:
    async with backend.make(working_dir=tmp_path) as kernel:
        await kernel.execute("import json\nforgotten = 1")
        pid = await pid_of(kernel)
        await kernel.reset()
        result = await kernel.execute("print('forgotten' in globals(), 'json' in globals())")
        assert result.text == "False False\n"
        assert kernel.restarts == 1
        assert await pid_of(kernel) != pid
