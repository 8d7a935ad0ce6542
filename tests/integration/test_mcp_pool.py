"""The MCP connection pool: pre-opened, never-used connections per server configuration, one per agent.

Real calc servers throughout; each connection is told apart by the server's process id
(`calc_server_pid`), and the processes under this test are counted with psutil.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psutil

from freeact_sub import Agent, AgentConfig, SubagentFinished, ToolOutput
from freeact_sub.config.mcp_servers import McpServerConfig
from freeact_sub.mcp.pool import McpPool
from freeact_sub.mcp.servers import McpConnections
from tests.processes import calc_servers, is_gone
from tests.scripting import Call, Router, Script, drive, of, until


def servers_of(entry: dict[str, Any]) -> dict[str, McpServerConfig]:
    return AgentConfig(mcp_servers={"calc": entry}).mcp_servers


async def server_pid(mcp: McpConnections) -> int:
    text, is_error = await mcp.call("calc_server_pid", {})
    assert not is_error, text
    return int(text)


async def test_pool_hands_each_opened_connection_to_one_owner_and_refills(calc_server_config: dict,
                                                                          workdir: Path) -> None:
    servers = servers_of(calc_server_config)
    spec = servers["calc"]
    pool = McpPool(size=2)
    owners: list[McpConnections] = []
    try:
        pool.fill(servers, workdir)
        await until(lambda: pool.ready("calc", spec, workdir) == 2, "the pool should open 2 connections")
        pooled = calc_servers()
        assert len(pooled) == 2

        for _ in range(3):
            owner = McpConnections(servers, cwd=workdir, pool=pool)
            await owner.open()
            owners.append(owner)
        pids = [await server_pid(owner) for owner in owners]
        assert set(pids[:2]) == pooled, "the first two owners got the pre-opened connections"
        assert pids[2] not in pooled and len(set(pids)) == 3, "with the pool empty, an owner opens its own"
        assert pool.ready("calc", spec, workdir) == 0
        other = servers_of({**calc_server_config, "env": {"SOME": "thing"}})["calc"]
        assert await pool.take("calc", other, workdir) is None, "a different configuration is a different pool"

        await owners.pop(0).close()
        assert await is_gone(pids[0]), "a pooled connection is closed with its owner"
        pool.fill(servers, workdir)
        await until(lambda: pool.ready("calc", spec, workdir) == 2, "the pool should refill")
        refilled = calc_servers() - set(pids)
        assert len(refilled) == 2, "refilled with new servers, never with one that was handed out"
    finally:
        await pool.close()
        await asyncio.gather(*(owner.close() for owner in owners))
    assert calc_servers() == set()


async def test_a_pooled_server_that_died_while_idle_is_not_handed_out(calc_server_config: dict,
                                                                     workdir: Path) -> None:
    servers = servers_of(calc_server_config)
    pool = McpPool(size=1)
    owner = McpConnections(servers, cwd=workdir, pool=pool)
    try:
        pool.fill(servers, workdir)
        await until(lambda: pool.ready("calc", servers["calc"], workdir) == 1, "the pool should fill")
        (dead,) = calc_servers()
        psutil.Process(dead).kill()
        assert await is_gone(dead)
        await owner.open()
        assert await server_pid(owner) != dead
    finally:
        await owner.close()
        await pool.close()


async def test_a_subagent_gets_a_pre_opened_connection_that_dies_with_it(calc_server_config: dict,
                                                                         workdir: Path) -> None:
    parent = Script(
        [Call("calc_server_pid", {}, id="main-pid")], ["first done"],  # turn 1
        [Call("task", {"prompt": "CHILD: pid"})], ["done"],  # turn 2
    )
    child = Script([Call("calc_server_pid", {}, id="child-pid")], ["child done"])
    model = Router({"PARENT": parent, "CHILD:": child}).model
    config = AgentConfig(model=model, working_dir=workdir, auto_approve=True, kernel_pool_size=0,
                         mcp_pool_size=1, mcp_servers={"calc": calc_server_config}, prestart_pools=True)
    async with Agent(config) as agent:
        spec = config.mcp_servers["calc"]
        events = await drive(agent.stream("PARENT: first"))
        main_pid = int(of(ToolOutput, events)[0].content)
        await until(lambda: len(calc_servers()) == 2, "the main agent's server and one pooled")
        (pooled,) = calc_servers() - {main_pid}

        events = await drive(agent.stream("PARENT: spawn"))
        (finished,) = of(SubagentFinished, events)
        child_pid = int(next(e.content for e in of(ToolOutput, events) if e.tool_call_id == "child-pid"))
        assert finished.status == "done"
        assert child_pid == pooled, "the child used the connection opened before it was spawned"
        assert await is_gone(child_pid), "and closed it when it ended"
        await until(lambda: len(calc_servers() - {main_pid, pooled}) == 1, "the pool should refill")
        await until(lambda: agent.tree.supplies.mcp_pool.ready("calc", spec, workdir) == 1, "the new entry should open")
    assert calc_servers() == set(), "stop() closes the pool's idle connections"


async def test_no_connections_are_pre_opened_with_the_pool_off(calc_server_config: dict, workdir: Path) -> None:
    script = Script([Call("calc_server_pid", {}, id="main-pid")], ["done"])
    config = AgentConfig(model=script.model, working_dir=workdir, mcp_pool_size=0, kernel_pool_size=0,
                         auto_approve=True, mcp_servers={"calc": calc_server_config})
    async with Agent(config) as agent:
        await drive(agent.stream("go"))
        await asyncio.sleep(1.0)  # a pool would have started its server by now
        assert len(calc_servers()) == 1
