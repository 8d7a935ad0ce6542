"""`GatewayKernel` against a real Jupyter Kernel Gateway on 127.0.0.1: what only a gateway's kernel does (its
environment and user, shutdown on the gateway, the errors of a gateway that is down or refuses the token). What both
backends promise (output, images, interrupts, timeouts, deaths, reset) is in `test_kernel_contract.py`."""

from __future__ import annotations

import asyncio
import functools
import getpass
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

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


async def _pid(kernel: GatewayKernel) -> int:
    return int((await kernel.execute("import os\nprint(os.getpid())")).text)


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
