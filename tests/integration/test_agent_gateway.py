"""An agent tree whose kernels all run on a real Jupyter Kernel Gateway (127.0.0.1), checked through the
gateway's own `GET /api/kernels`: main agent and children, the pool of pre-started remote kernels,
cancellation and `stop()` leaving no kernel on the gateway, and a gateway that is down."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from freeact_sub import Agent, AgentConfig, CodeExecutionOutput, RunCancelled, SubagentFinished
from freeact_sub.errors import KernelError
from freeact_sub.kernels.gateway import GatewayKernel
from freeact_sub.kernels.zygote import process_zygote_pids
from tests.cli_fork import cli_command
from tests.gateway_server import TOKEN_ENV, GatewayServer, free_port, token_gateway
from tests.scripting import Block, Call, Router, Script, configs, drive, until

KERNEL_ID = re.compile(r"KERNEL=([0-9a-f-]{36})")
# The gateway names each kernel's connection file after the kernel's id.
PRINT_KERNEL_ID = (
    "import os, re\nfrom ipykernel import get_connection_file\n"
    "print('KERNEL=' + re.search(r'kernel-([0-9a-f-]{36})', get_connection_file()).group(1), flush=True)\n"
)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayServer]:
    with token_gateway(tmp_path_factory.mktemp("gateway")) as server:
        yield server


def config(model: Any, workdir: Path, gateway: GatewayServer, **overrides: Any) -> AgentConfig:
    gateway_kernels = {"url": gateway.url, "token_env": TOKEN_ENV}
    return configs(auto_approve=True, save_sessions=False, kernel_gateway=gateway_kernels)(model, workdir, **overrides)


def task(name: str) -> Call:
    return Call("task", {"prompt": f"CHILD-{name}: report your kernel"}, id=f"task-{name}")


def cell(code: str, call_id: str | None = None) -> Call:
    return Call("execute_ipython_cell", {"code": code}, id=call_id)


async def test_a_main_agent_and_three_children_run_every_kernel_on_the_gateway(
    gateway: GatewayServer, workdir: Path
) -> None:
    parent = Script([cell(PRINT_KERNEL_ID, "main-cell")], [task("a"), task("b"), task("c")], ["all done"])
    children = {name: Script([cell(PRINT_KERNEL_ID)], [f"answer {name}"]) for name in "abc"}
    model = Router({"PARENT": parent, **{f"CHILD-{name}:": script for name, script in children.items()}})
    seen_on_gateway: dict[str, list[str]] = {}

    def on_event(event: Any) -> None:
        if isinstance(event, CodeExecutionOutput):
            # while the cell's agent runs, the gateway lists the kernel the cell ran in
            seen_on_gateway[event.agent_id] = gateway.kernel_ids()

    zygotes = process_zygote_pids()
    async with Agent(config(model.model, workdir, gateway, kernel_pool_size=1, max_subagents=3)) as agent:
        assert isinstance(agent.kernel, GatewayKernel)
        events = await drive(agent.stream("PARENT"), on_event=on_event, limit=180)
        # no local kernel machinery was started: no zygote, no kernel forked
        assert process_zygote_pids() == zygotes and not agent.tree.supplies.zygote.kernels
        outputs = [e for e in events if isinstance(e, CodeExecutionOutput)]
        ran_in = {e.agent_id: KERNEL_ID.findall(e.content)[0] for e in outputs}
        assert len(ran_in) == 4 and len(set(ran_in.values())) == 4  # the main agent and three children
        assert ran_in[agent.agent_id] == agent.kernel.kernel_id
        for agent_id, kernel_id in ran_in.items():
            assert kernel_id in seen_on_gateway[agent_id]
        assert {e.status for e in events if isinstance(e, SubagentFinished)} == {"done"}
        # the children's kernels are deleted as each child ends; the main one and the pool's remain
        await until(lambda: len(gateway.kernel_ids()) == 1 + 1, "the main and a pooled kernel", in_thread=True)
        assert agent.kernel.kernel_id in gateway.kernel_ids()
    assert gateway.kernel_ids() == []


async def test_the_pool_holds_started_kernels_on_the_gateway_for_children(
    gateway: GatewayServer, workdir: Path
) -> None:
    parent = Script([task("p")], ["done"])
    child = Script([cell(PRINT_KERNEL_ID)], ["ok"])
    model = Router({"PARENT": parent, "CHILD-p:": child})
    async with Agent(config(model.model, workdir, gateway, kernel_pool_size=2, prestart_pools=True)) as agent:
        await until(lambda: agent.tree.supplies.pool.ready == 2, "two pooled gateway kernels")
        pooled = set(gateway.kernel_ids()) - {agent.kernel.kernel_id}  # type: ignore[union-attr]
        assert len(pooled) == 2
        events = await drive(agent.stream("PARENT"), limit=180)
        child_output = [e for e in events if isinstance(e, CodeExecutionOutput)]
        assert KERNEL_ID.findall(child_output[0].content)[0] in pooled  # the child did not wait for a start
    assert gateway.kernel_ids() == []


async def test_cancelling_a_turn_and_stopping_leave_no_kernel_on_the_gateway(
    gateway: GatewayServer, workdir: Path
) -> None:
    names = ["x", "y"]
    parent = Script([task(name) for name in names])
    running = asyncio.Event()
    children = {
        name: Script([cell(PRINT_KERNEL_ID + "import time\ntime.sleep(600)")]) for name in names
    }
    model = Router({"PARENT": parent, **{f"CHILD-{name}:": script for name, script in children.items()}})
    async with Agent(config(model.model, workdir, gateway, kernel_pool_size=0, max_subagents=2)) as agent:
        started: set[str] = set()

        def on_event(event: Any) -> None:
            if "KERNEL=" in getattr(event, "content", ""):
                started.add(event.agent_id)
                if len(started) == 2:
                    running.set()
                    agent.cancel()

        events = await drive(agent.stream("PARENT"), on_event=on_event, limit=180)
        assert running.is_set()
        assert isinstance(events[-1], RunCancelled)
        assert {e.status for e in events if isinstance(e, SubagentFinished)} == {"cancelled"}
        assert gateway.kernel_ids() == [agent.kernel.kernel_id]  # type: ignore[union-attr]
    assert gateway.kernel_ids() == []


async def test_stop_during_a_running_cell_deletes_the_kernel(gateway: GatewayServer, workdir: Path) -> None:
    started = asyncio.Event()
    script = Script([cell(PRINT_KERNEL_ID + "import time\ntime.sleep(600)")], [Block()])
    agent = Agent(config(script.model, workdir, gateway, enable_subagents=False, kernel_pool_size=0))
    await agent.start()

    def on_event(event: Any) -> None:
        if "KERNEL=" in getattr(event, "content", ""):
            started.set()

    turn = asyncio.create_task(drive(agent.stream("go"), on_event=on_event, limit=180))
    await asyncio.wait_for(started.wait(), 60)
    assert len(gateway.kernel_ids()) == 1
    await agent.stop()
    await asyncio.gather(turn, return_exceptions=True)
    assert gateway.kernel_ids() == []


async def test_an_agent_whose_gateway_is_down_fails_to_start_with_one_error_naming_it(workdir: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    script = Script(["never"])
    agent = Agent(AgentConfig(model=script.model, working_dir=workdir, kernel_gateway=url, save_sessions=False))
    with pytest.raises(KernelError, match=re.escape(url)):
        await agent.start()
    assert not agent.started
    assert script.calls == 0


def _cli(*args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FREEACT_SUB_") and not k.endswith("_API_KEY")}
    env.update(extra)
    return subprocess.run(
        cli_command(*args),
        cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240,
    )


async def test_the_cli_runs_its_cells_on_the_gateway_given_by_the_flag(gateway: GatewayServer, workdir: Path) -> None:
    starts_before = gateway.log.read_text().count("Kernel started:")
    done = await asyncio.to_thread(
        _cli, "--demo", "-p", "one cell", "--auto-approve", "--kernel-gateway", gateway.url, cwd=workdir,
        JUPYTER_GATEWAY_AUTH_TOKEN=gateway.token,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The sum of 1 to 100 is **5050**.\n"
    assert gateway.log.read_text().count("Kernel started:") > starts_before  # the kernels were the gateway's
    assert gateway.kernel_ids() == []  # and all were deleted when the command ended


async def test_the_cli_names_a_gateway_that_refuses_the_token(gateway: GatewayServer, workdir: Path) -> None:
    done = await asyncio.to_thread(
        _cli, "--demo", "-p", "one cell", "--auto-approve", "--kernel-gateway", gateway.url, cwd=workdir,
        JUPYTER_GATEWAY_AUTH_TOKEN="wrong",
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert gateway.url in done.stderr and "refused" in done.stderr and "Traceback" not in done.stderr
