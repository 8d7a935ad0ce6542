"""`GatewayKernel` against a real Jupyter Kernel Gateway on 127.0.0.1: output, images, interrupts, timeouts,
deaths, reset, environment, shutdown and the errors of a gateway that is down or refuses the token."""

from __future__ import annotations

import asyncio
import base64
import functools
import getpass
import os
import signal
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import pytest_asyncio

from freeact_sub.config.agent_config import KernelGatewayConfig
from freeact_sub.errors import KernelError
from freeact_sub.kernels.gateway import GatewayKernel
from tests.gateway_server import TOKEN_ENV, GatewayServer, free_port, kernel_gateway, token_gateway
from tests.processes import is_gone

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayServer]:
    with token_gateway(tmp_path_factory.mktemp("gateway")) as server:
        yield server


def _config(server: GatewayServer, **changes: object) -> KernelGatewayConfig:
    return KernelGatewayConfig.model_validate({"url": server.url, "token_env": TOKEN_ENV, **changes})


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kernel(gateway: GatewayServer, tmp_path_factory: pytest.TempPathFactory):
    """One gateway kernel shared by the tests that do not kill, restart or reconfigure it."""
    async with GatewayKernel(_config(gateway), images_dir=tmp_path_factory.mktemp("images")) as shared:
        yield shared


async def _pid(kernel: GatewayKernel) -> int:
    return int((await kernel.execute("import os\nprint(os.getpid())")).text)


def _png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


# -- output ------------------------------------------------------------------------------------


async def test_output_streams_while_the_cell_runs(kernel: GatewayKernel, tmp_path: Path) -> None:
    # the cell can end only if its first output reached us while it still ran
    flag = tmp_path / "go"
    code = (
        "import os, time\n"
        "print('waiting', flush=True)\n"
        f"while not os.path.exists({str(flag)!r}):\n"
        "    time.sleep(0.01)\n"
        "print('released')"
    )
    seen: list[str] = []

    def on_output(text: str) -> None:
        seen.append(text)
        if "waiting" in text:
            flag.touch()

    result = await kernel.execute(code, timeout=30, on_output=on_output)
    assert result.status == "ok", result.text
    assert result.text == "waiting\nreleased\n"
    assert "".join(seen) == result.text


async def test_stdout_stderr_results_display_data_and_errors(kernel: GatewayKernel) -> None:
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
    failed = await kernel.execute("def f():\n    return 1 / 0\n\nprint('before')\nf()")
    assert failed.status == "error"
    assert failed.text.startswith("before\n")
    assert "ZeroDivisionError" in failed.text and "return 1 / 0" in failed.text
    assert "\x1b[" not in failed.text


async def test_the_kernel_keeps_state_and_runs_cells_one_after_another(kernel: GatewayKernel) -> None:
    await kernel.execute("kept = []")
    code = "import time\nkept.append('{0}-start')\ntime.sleep(0.1)\nkept.append('{0}-end')\nprint('{0}')"
    results = await asyncio.gather(*(kernel.execute(code.format(name)) for name in "abc"))
    assert [r.text for r in results] == ["a\n", "b\n", "c\n"]
    order = await kernel.execute("print(' '.join(kept))")
    assert order.text == "a-start a-end b-start b-end c-start c-end\n"


async def test_images_are_saved_on_the_host(gateway: GatewayServer, tmp_path: Path) -> None:
    png = _png()
    images = tmp_path / "host-images"
    async with GatewayKernel(_config(gateway), images_dir=images, label="agent-img") as kernel:
        code = (
            "import base64\n"
            "from IPython.display import Image, display\n"
            f"data = base64.b64decode({base64.b64encode(png).decode()!r})\n"
            "display(Image(data=data))\n"
            "Image(data=data)"
        )
        result = await kernel.execute(code)
    assert result.status == "ok", result.text
    assert len(result.images) == 2
    for path in result.images:
        assert path.parent == images and path.name.startswith("agent-img-")
        assert path.read_bytes() == png
        assert f"[image saved: {path}]" in result.text
    assert "iVBOR" not in result.text


async def test_output_printed_right_before_the_cell_ends_is_all_there(kernel: GatewayKernel) -> None:
    for attempt in range(10):
        code = f"import sys\nprint('x' * 5000)\nsys.stderr.write('err-{attempt}')\nsys.stdout.write('tail-{attempt}')"
        result = await kernel.execute(code)
        assert result.text.count("x") == 5000
        assert f"err-{attempt}" in result.text and f"tail-{attempt}" in result.text


async def test_ten_thousand_flushed_lines_all_arrive_in_order(kernel: GatewayKernel) -> None:
    chunks: list[str] = []
    result = await kernel.execute(
        "for i in range(10_000):\n    print(f'line {i}', flush=True)", on_output=chunks.append
    )
    assert result.text.splitlines() == [f"line {i}" for i in range(10_000)]
    assert "".join(chunks) == result.text


async def test_a_cell_asking_for_input_fails_instead_of_hanging(kernel: GatewayKernel) -> None:
    result = await kernel.execute("input('name? ')", timeout=60)
    assert result.status == "error"
    assert "StdinNotImplementedError" in result.text


# -- environment -------------------------------------------------------------------------------


async def test_the_kernel_gets_the_configured_env_and_not_the_hosts_api_keys(
    gateway: GatewayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret")
    env = {"GRANTED": "yes", "KERNEL_PROJECT": "demo"}
    async with GatewayKernel(_config(gateway), env=env) as kernel:
        result = await kernel.execute(
            "import os\n"
            "for name in ('OPENAI_API_KEY', 'GRANTED', 'KERNEL_PROJECT'):\n"
            "    print(name, '=', os.environ.get(name))"
        )
    seen = dict(line.split(" = ", 1) for line in result.text.splitlines())
    assert seen == {"OPENAI_API_KEY": "None", "GRANTED": "yes", "KERNEL_PROJECT": "demo"}


async def test_every_kernel_start_names_its_user(gateway: GatewayServer) -> None:
    # KERNEL_USERNAME goes with every start (Enterprise Gateway authorizes by it); Kernel Gateway passes it on
    show = "import os\nprint(os.environ.get('KERNEL_USERNAME'))"
    async with GatewayKernel(_config(gateway)) as kernel:
        assert (await kernel.execute(show)).text.strip() == getpass.getuser()
    async with GatewayKernel(_config(gateway), env={"KERNEL_USERNAME": "from-env"}) as kernel:
        assert (await kernel.execute(show)).text.strip() == "from-env"
    async with GatewayKernel(_config(gateway, username="alice"), env={"KERNEL_USERNAME": "from-env"}) as kernel:
        assert (await kernel.execute(show)).text.strip() == "alice"
        await kernel.reset()  # a restarted kernel is the same user's
        assert (await kernel.execute(show)).text.strip() == "alice"


# -- timeouts, interrupts, cancellation --------------------------------------------------------


async def test_a_cell_past_its_timeout_is_interrupted_and_the_kernel_stays_usable(kernel: GatewayKernel) -> None:
    await kernel.execute("before_timeout = 'kept'")
    pid = await _pid(kernel)
    result = await kernel.execute("print('started', flush=True)\nwhile True:\n    pass", timeout=1)
    assert result.status == "timeout"
    assert result.text.startswith("started\n")
    assert "KeyboardInterrupt" in result.text
    assert "timed out after 1 s" in result.text
    assert (await kernel.execute("print(before_timeout)")).text == "kept\n"  # an interrupt, not a restart
    assert await _pid(kernel) == pid


async def test_a_cell_that_ignores_the_interrupt_gets_a_restarted_kernel(gateway: GatewayServer) -> None:
    async with GatewayKernel(_config(gateway)) as kernel:
        pid = await _pid(kernel)
        code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.05)"
        result = await kernel.execute(code, timeout=0.5)
        assert result.status == "timeout"
        assert "did not stop" in result.text and "state was lost" in result.text
        assert await is_gone(pid)
        assert (await kernel.execute("print('alive')")).text == "alive\n"
        assert await _pid(kernel) != pid


async def test_cancelling_execute_interrupts_the_cell(kernel: GatewayKernel) -> None:
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


async def test_a_kernel_that_dies_in_a_cell_is_restarted_and_says_state_was_lost(gateway: GatewayServer) -> None:
    async with GatewayKernel(_config(gateway)) as kernel:
        await kernel.execute("doomed = 1")
        pid = await _pid(kernel)
        result = await kernel.execute("import os\nprint('about to die', flush=True)\nos._exit(1)")
        assert result.status == "kernel_died"
        assert "died" in result.text and "lost" in result.text
        assert kernel.restarts == 1  # and the cell that ended its kernel was not sent to the new one
        after = await kernel.execute("print('doomed' in globals())")
        assert (after.status, after.text) == ("ok", "False\n")
        assert await _pid(kernel) != pid


async def test_a_kernel_killed_between_cells_is_restarted_and_the_next_cell_says_so(gateway: GatewayServer) -> None:
    async with GatewayKernel(_config(gateway)) as kernel:
        await kernel.execute("lost = 1")
        pid = await _pid(kernel)
        os.kill(pid, signal.SIGKILL)
        assert await is_gone(pid)
        seen: list[str] = []
        result = await kernel.execute("print('fresh')", on_output=seen.append)
        # Whether the gateway's news of the death came before the request was sent decides which
        # of two honest answers this is; the cell is never sent twice.
        assert "restarted" in result.text and "lost" in result.text
        assert result.text.count("fresh") <= 1
        if result.status == "ok":
            assert result.text.endswith("fresh\n")
        else:
            assert result.status == "kernel_died"
            assert "may not have run" in result.text and "fresh" not in result.text
        assert kernel.restarts == 1
        assert "".join(seen) == result.text
        assert (await kernel.execute("print('lost' in globals())")).text == "False\n"


async def test_reset_gives_a_clean_kernel(gateway: GatewayServer) -> None:
    async with GatewayKernel(_config(gateway)) as kernel:
        await kernel.execute("import json\nforgotten = 1")
        await kernel.reset()
        result = await kernel.execute("print('forgotten' in globals(), 'json' in globals())")
        assert result.text == "False False\n"
        assert kernel.restarts == 1


# -- lifecycle and errors ----------------------------------------------------------------------


async def test_shutdown_deletes_the_kernel_on_the_gateway(gateway: GatewayServer) -> None:
    before = set(gateway.kernel_ids())
    kernel = GatewayKernel(_config(gateway))
    await kernel.start()
    assert kernel.kernel_id in gateway.kernel_ids()
    pid = await _pid(kernel)
    await kernel.shutdown()
    assert not kernel.started
    assert set(gateway.kernel_ids()) == before
    assert await is_gone(pid)
    await kernel.shutdown()  # a second shutdown is harmless
    with pytest.raises(KernelError, match="not running"):
        await kernel.execute("1")


async def test_a_start_cancelled_while_the_gateway_starts_the_kernel_leaves_no_kernel(gateway: GatewayServer) -> None:
    before = set(gateway.kernel_ids())
    kernel = GatewayKernel(_config(gateway))
    starting = asyncio.create_task(kernel.start())
    await asyncio.sleep(0.05)  # the POST is on its way; the gateway goes on starting the kernel
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert not kernel.started
    assert set(gateway.wait_for_kernels(len(before))) == before


async def test_a_gateway_that_is_down_gives_one_error_naming_its_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    kernel = GatewayKernel(KernelGatewayConfig(url=url))
    with pytest.raises(KernelError) as caught:
        await kernel.start()
    assert url in str(caught.value)
    assert "cannot be reached" in str(caught.value)
    assert not kernel.started


async def test_a_gateway_that_refuses_the_token_gives_one_error_naming_its_url(
    gateway: GatewayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WRONG_GATEWAY_TOKEN", "not-the-token")
    kernel = GatewayKernel(_config(gateway, token_env="WRONG_GATEWAY_TOKEN"))
    with pytest.raises(KernelError) as caught:
        await kernel.start()
    message = str(caught.value)
    assert gateway.url in message and "HTTP 401" in message and "$WRONG_GATEWAY_TOKEN" in message
    without = GatewayKernel(_config(gateway, token_env="NO_SUCH_TOKEN_VARIABLE"))
    with pytest.raises(KernelError, match="wants a token: set \\$NO_SUCH_TOKEN_VARIABLE"):
        await without.start()


async def test_a_refusal_that_is_not_about_the_token_quotes_the_gateways_reason(tmp_path: Path) -> None:
    # a gateway without a token at its kernel limit: the 403 says "Resource Limit", not "set a token"
    with kernel_gateway(tmp_path, "--KernelGatewayApp.max_kernels=1", token="") as server:
        settings = KernelGatewayConfig(url=server.url, token_env="NO_SUCH_TOKEN_VARIABLE")
        async with GatewayKernel(settings):
            second = GatewayKernel(settings)
            with pytest.raises(KernelError) as caught:
                await second.start()
            assert not second.started
        assert server.kernel_ids() == []
    message = str(caught.value)
    assert server.url in message and "HTTP 403" in message and "Resource Limit" in message
    assert "token" not in message


async def test_gateway_kernels_are_deleted_at_host_exit(gateway: GatewayServer, tmp_path: Path) -> None:
    # a host that exits without shutting its kernel down (no `async with`, no stop) still deletes it
    script = tmp_path / "host.py"
    script.write_text(
        "import asyncio, sys\n"
        "from freeact_sub.config.agent_config import KernelGatewayConfig\n"
        "from freeact_sub.kernels.gateway import GatewayKernel\n"
        "async def main():\n"
        f"    kernel = GatewayKernel(KernelGatewayConfig(url={gateway.url!r}, token_env={TOKEN_ENV!r}))\n"
        "    await kernel.start()\n"
        "    print(kernel.kernel_id, flush=True)\n"
        "asyncio.run(main())\n"
    )
    before = set(gateway.kernel_ids())
    run = functools.partial(subprocess.run, capture_output=True, text=True, timeout=120)
    done = await asyncio.to_thread(run, [sys.executable, str(script)])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() not in gateway.kernel_ids()
    assert set(gateway.wait_for_kernels(len(before))) == before
    assert psutil.Process(gateway.process.pid).is_running()


async def test_output_dropped_by_the_gateways_rate_limit_is_reported(tmp_path: Path) -> None:
    # a gateway with its IOPub rate limit on (and low): what it drops, the cell's text says
    limited = ("--ZMQChannelsWebsocketConnection.iopub_msg_rate_limit=50",
               "--ZMQChannelsWebsocketConnection.rate_limit_window=1")
    with kernel_gateway(tmp_path, *limited, rate_limit=True) as server:
        os.environ["FREEACT_SUB_LIMITED_GATEWAY_TOKEN"] = server.token
        try:
            gateway = KernelGatewayConfig(url=server.url, token_env="FREEACT_SUB_LIMITED_GATEWAY_TOKEN")
            async with GatewayKernel(gateway) as kernel:
                result = await kernel.execute("for i in range(2000):\n    print(i, flush=True)")
        finally:
            os.environ.pop("FREEACT_SUB_LIMITED_GATEWAY_TOKEN", None)
    assert result.status == "ok"
    assert len(result.text.splitlines()) < 2000
    assert "dropped part of this output" in result.text and "limit_rate=False" in result.text
    assert "IOPub message rate exceeded" not in result.text  # the gateway's own notice is replaced by ours
