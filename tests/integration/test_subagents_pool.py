"""The kernel pool behind subagents: pre-started, never-used kernels, refilled in the background.

Real kernels throughout; `kernel_processes()` counts the IPython kernels this test process runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from freeact_sub import Agent, AgentConfig, KernelError
from freeact_sub.kernels.local import Kernel
from freeact_sub.kernels.pool import KernelPool
from freeact_sub.kernels.zygote import process_zygote
from tests.processes import kernel_processes
from tests.scripting import Call, Router, Script, until

FIRST_CELL_CHECK = (
    "_builtin = {'In', 'Out', 'exit', 'quit', 'get_ipython', 'open'}\n"
    "print(len(In) - 1, sorted(n for n in globals() if not n.startswith('_') and n not in _builtin))\n"
)


@pytest.fixture(autouse=True)
async def forking_zygote() -> None:
    """The process's zygote, running: the pools here fork their kernels, as an agent tree's do (a launch costs about
    ten times a fork's CPU; `test_kernel.py` covers launched kernels)."""
    await process_zygote().start()


def kernel_factory(workdir: Path, made: list[Kernel]) -> Callable[[], Kernel]:
    def new_kernel() -> Kernel:
        kernel = Kernel(working_dir=workdir, label="pool-test", launcher=process_zygote())
        made.append(kernel)
        return kernel

    return new_kernel


async def test_pool_hands_out_each_started_kernel_once_and_refills(workdir: Path) -> None:
    made: list[Kernel] = []
    pool = KernelPool(kernel_factory(workdir, made), size=2)
    taken: list[Kernel] = []
    try:
        pool.fill()
        await until(lambda: pool.ready == 2, "the pool should fill to its size")
        assert len(made) == 2 and all(k.started for k in made)
        ready = list(made)

        first = await pool.acquire()
        taken.append(first)
        second = await pool.acquire()
        taken.append(second)
        assert {first, second} == set(ready), "a full pool hands out the kernels it started"
        assert first is not second
        for kernel in (first, second):
            outcome = await kernel.execute(FIRST_CELL_CHECK)
            assert outcome.text.strip() == "1 []", "a pooled kernel has never run code"

        # the pool refills in the background, with new kernels
        pool.fill()
        await until(lambda: pool.ready == 2, "the pool should refill after kernels were taken")
        assert len(made) == 4
        third = await pool.acquire()
        taken.append(third)
        assert third not in (first, second)
    finally:
        await pool.close()
        await asyncio.gather(*(k.shutdown() for k in taken))
    assert pool.ready == 0
    assert kernel_processes() == []


async def test_empty_pool_starts_a_kernel_on_demand(workdir: Path) -> None:
    made: list[Kernel] = []
    pool = KernelPool(kernel_factory(workdir, made), size=0)
    kernel = await pool.acquire()
    try:
        assert kernel.started and len(made) == 1
        assert (await kernel.execute("print(6 * 7)")).text.strip() == "42"
        pool.fill()  # a pool of size 0 never starts kernels of its own
        await asyncio.sleep(0)
        assert pool.ready == 0 and len(made) == 1
    finally:
        await kernel.shutdown()
        await pool.close()


@pytest.mark.parametrize("close_after", ["at_once", "process_spawned", "one_ready"])
async def test_closing_a_filling_pool_leaves_no_kernel(workdir: Path, close_after: str) -> None:
    made: list[Kernel] = []
    pool = KernelPool(kernel_factory(workdir, made), size=2)
    pool.fill()
    if close_after == "process_spawned":
        await until(lambda: bool(kernel_processes()), "a kernel process should be starting")
    elif close_after == "one_ready":
        await until(lambda: pool.ready >= 1, "one kernel should be ready")
    await pool.close()
    assert pool.ready == 0
    assert kernel_processes() == []
    pool.fill()  # a closed pool stays empty
    await asyncio.sleep(0)
    assert kernel_processes() == []


async def test_a_cancelled_acquire_stops_the_kernel_booting_for_it(workdir: Path) -> None:
    """A caller cancelled while its kernel boots (a subagent cancelled as it starts) leaves no kernel behind."""
    made: list[Kernel] = []
    pool = KernelPool(kernel_factory(workdir, made), size=0)
    try:
        waiter = asyncio.create_task(pool.acquire())
        await until(lambda: len(made) == 1, "a kernel should start booting for the caller")
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert pool.ready == 0
        assert kernel_processes() == [], "the kernel booted for a cancelled caller is stopped with it"
    finally:
        await pool.close()


async def test_a_failed_background_start_does_not_fail_a_later_caller(workdir: Path) -> None:
    """The pool could not pre-start a kernel (once); the next caller still gets a working kernel."""
    not_a_folder = workdir / "not-a-folder"
    not_a_folder.write_text("a file where the kernel's working folder should be")
    made: list[Kernel] = []

    def new_kernel() -> Kernel:
        kernel = Kernel(working_dir=not_a_folder if not made else workdir, label="pool-test",
                        launcher=process_zygote())
        made.append(kernel)
        return kernel

    pool = KernelPool(new_kernel, size=1)
    kernel: Kernel | None = None
    try:
        pool.fill()
        await until(lambda: len(made) == 1 and not pool._booting, "the first background start should fail")
        assert pool.ready == 0, "a failed start is no ready kernel"
        kernel = await pool.acquire()
        assert kernel.started and kernel is made[-1]
        assert (await kernel.execute("print(2 + 2)")).text.strip() == "4"
    finally:
        if kernel is not None:
            await kernel.shutdown()
        await pool.close()


async def test_a_caller_whose_kernel_cannot_start_gets_the_error(workdir: Path) -> None:
    not_a_folder = workdir / "not-a-folder"
    not_a_folder.write_text("a file where the kernel's working folder should be")
    pool = KernelPool(lambda: Kernel(working_dir=not_a_folder), size=0)
    try:
        async with asyncio.timeout(60):
            with pytest.raises(KernelError, match="did not start"):
                await pool.acquire()
    finally:
        await pool.close()


async def test_agent_pool_fills_serves_children_and_stops_with_the_agent(workdir: Path) -> None:
    parent = Script(
        [Call("task", {"prompt": "CHILD-one: check"}, id="task-one")],
        [Call("task", {"prompt": "CHILD-two: check"}, id="task-two")],
        ["done"],
    )
    check = [Call("execute_ipython_cell", {"code": "import os\nprint(os.getpid())\n" + FIRST_CELL_CHECK})]
    one = Script(check, ["one done"])
    two = Script(check, ["two done"])
    model = Router({"PARENT": parent, "CHILD-one:": one, "CHILD-two:": two})
    cfg = AgentConfig(model=model.model, working_dir=workdir, auto_approve=True, kernel_pool_size=1, max_subagents=1,
                      prestart_pools=True)
    async with Agent(cfg) as agent:
        pool = agent.tree.supplies.pool
        await until(lambda: pool.ready == 1, "the agent's pool should fill when the agent starts")
        parent_kernel = agent.kernel.pid if agent.kernel else None
        pooled = set(kernel_processes()) - {parent_kernel}
        assert len(pooled) == 1
        async with asyncio.timeout(120):
            async for _ in agent.stream("PARENT"):
                pass
        outputs = {key: script.tool_results(1) for key, script in (("one", one), ("two", two))}
        await until(lambda: pool.ready == 1, "the pool should refill after a child took its kernel")
        # between turns only the parent's kernel and the refilled pool's one kernel run
        between_turns = set(kernel_processes())
        assert parent_kernel in between_turns and len(between_turns) == 2
    assert kernel_processes() == [], "the pool is shut down with the agent"

    pids = []
    for key, results in outputs.items():
        (text,) = results.values()
        pid, rest = text.strip().split("\n", 1)
        assert rest == "1 ['os']", f"child {key} got a kernel that had run code: {rest!r}"
        pids.append(int(pid))
    assert pids[0] in pooled, "the first child should get the kernel pooled at start"
    assert pids[0] != pids[1] and parent_kernel not in pids


class _WatchedKernel(Kernel):
    """A real kernel that notes the cells it is given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cells: list[tuple[str, bool]] = []

    async def run_cell(self, cell: Any) -> Any:
        self.cells.append((cell.code, cell.store_history))
        return await super().run_cell(cell)


async def test_a_pooled_kernel_has_run_its_first_cell_out_of_history_before_it_is_handed_out(workdir: Path) -> None:
    """A kernel's first cell is its slow one (code paths run and pages written for the first time): the pool runs a
    warm-up cell on each kernel it boots ahead, out of history, so a child's first cell is not that one and still
    finds the kernel fresh; a kernel a caller waits for is handed over at once."""
    made: list[_WatchedKernel] = []

    def new_kernel() -> Kernel:
        made.append(_WatchedKernel(working_dir=workdir, label="pool-test", launcher=process_zygote()))
        return made[-1]

    pool = KernelPool(new_kernel, size=1)
    taken: list[Kernel] = []
    try:
        pool.fill()
        await until(lambda: pool.ready == 1, "the pool should boot its kernel")
        taken.append(await pool.acquire())
        assert made[0].cells == [("pass", False)], "the kernel ran one warm-up cell, out of history, as it booted"
        outcome = await taken[0].execute(FIRST_CELL_CHECK)
        assert outcome.text.strip() == "1 []", "the model's first cell finds a kernel that never ran its code"
        taken.append(await pool.acquire())  # the pool is empty: this caller waits for its kernel's boot
        assert made[1].cells == [], "a kernel a caller waits for goes to it at once, without the warm-up"
    finally:
        await pool.close()
        await asyncio.gather(*(k.shutdown() for k in taken))
    assert kernel_processes() == []


async def test_boots_for_callers_to_come_wait_until_the_waiting_callers_have_their_kernels(workdir: Path) -> None:
    """A fan-out's first wave waits for kernels while the pool also boots the next wave's: those boots start only once
    the waiting callers have theirs, so they do not take the cores from them."""
    import time

    started: list[float] = []

    class Timed(Kernel):
        async def start(self, timeout: float = 60.0) -> None:
            started.append(time.monotonic())
            await super().start(timeout)

    made: list[Kernel] = []

    def new_kernel() -> Kernel:
        made.append(Timed(working_dir=workdir, label="pool-test", launcher=process_zygote()))
        return made[-1]

    pool = KernelPool(new_kernel, size=1)
    got: list[float] = []
    taken: list[Kernel] = []

    async def caller() -> None:
        taken.append(await pool.acquire())
        got.append(time.monotonic())

    try:
        callers = [asyncio.create_task(caller()) for _ in range(2)]
        await asyncio.sleep(0)  # both wait, each with a boot of its own
        pool.expect(4)  # two more callers to come
        await asyncio.gather(*callers)
        await until(lambda: pool.ready == 2, "the boots held back should start once the callers have their kernels")
        assert len(made) == 4 and len(started) == 4
        assert sorted(started)[2] > min(got), "a boot for a caller to come started while the callers waited"
    finally:
        await pool.close()
        await asyncio.gather(*(k.shutdown() for k in taken))
    assert kernel_processes() == []


async def test_the_pool_keeps_kernels_ready_for_the_callers_it_expects(workdir: Path) -> None:
    """Subagents queued for a slot are expected callers: their kernels boot before they ask (a pool that is on)."""
    made: list[Kernel] = []
    pool = KernelPool(kernel_factory(workdir, made), size=1)
    taken: list[Kernel] = []
    try:
        pool.expect(3)
        await until(lambda: pool.ready == 3, "the pool should hold a kernel for each expected caller")
        taken += [await pool.acquire() for _ in range(3)]
        assert len(made) == 3, "the expected callers got the kernels started for them, none on demand"
        pool.expect(0)  # nobody waits any more: back to the pool's size
        await until(lambda: pool.ready == 1, "the pool should refill to its size")
        assert len(made) == 4
    finally:
        await pool.close()
        await asyncio.gather(*(k.shutdown() for k in taken))
    assert kernel_processes() == []


async def test_the_pool_shrinks_back_to_its_size_when_the_expected_callers_do_not_come(workdir: Path) -> None:
    """A batch's kernels booted for it and not taken (its children got theirs, or were stopped) are shut down."""
    made: list[Kernel] = []
    pool = KernelPool(kernel_factory(workdir, made), size=1)
    try:
        pool.expect(3)
        await until(lambda: pool.ready == 3, "the pool should hold a kernel for each expected caller")
        pids = {k.pid for k in made}
        pool.expect(0)
        await until(lambda: pool.ready == 1, "the pool should shrink to its size", limit=30)
        await until(lambda: len(set(kernel_processes()) & pids) == 1, "the two surplus kernels should stop", limit=30)
        assert len(made) == 3, "no kernel was booted to replace them"
    finally:
        await pool.close()
    assert kernel_processes() == []


async def test_a_pool_that_is_off_starts_nothing_for_expected_callers(workdir: Path) -> None:
    made: list[Kernel] = []
    pool = KernelPool(kernel_factory(workdir, made), size=0)
    try:
        pool.expect(3)
        await asyncio.sleep(0)
        assert made == [] and pool.booting == 0
    finally:
        await pool.close()


async def test_children_queued_for_a_slot_find_their_kernels_started(workdir: Path) -> None:
    """While two children hold the slots, the pool boots kernels for the two queued ones; they take those."""
    go = workdir / "go"
    names = ["q1", "q2", "q3", "q4"]
    parent = Script([Call("task", {"prompt": f"CHILD-{name}"}, id=f"task-{name}") for name in names], ["done"])
    wait_then_pid = (
        f"import os, time, pathlib\nwhile not pathlib.Path({str(go)!r}).exists():\n    time.sleep(0.02)\n"
        "print(os.getpid())\n"
    )
    children = {
        name: Script([Call("execute_ipython_cell", {"code": wait_then_pid})], [f"{name} done"]) for name in names
    }
    model = Router({"PARENT": parent, **{f"CHILD-{name}": script for name, script in children.items()}})
    cfg = AgentConfig(model=model.model, working_dir=workdir, auto_approve=True, kernel_pool_size=1, max_subagents=2,
                      prestart_pools=True)
    async with Agent(cfg) as agent:
        pool = agent.tree.supplies.pool
        await until(lambda: pool.ready == 1, "the agent's pool should fill when the agent starts")
        turn = asyncio.create_task(drain(agent.stream("PARENT")))
        await until(lambda: sum(s.state == "waiting" for s in agent.subagents()) == 2, "two children queued")
        await until(lambda: sum(s.state == "running" for s in agent.subagents()) == 2, "two children run")
        await until(lambda: pool.ready == 2, "the pool should hold a kernel for each queued child")
        ready_for_them = (
            set(kernel_processes())
            - {agent.kernel.pid if agent.kernel else None}
            - {s_pid for s in agent.subagents() if (s_pid := _kernel_pid(agent, s.agent_id)) is not None}
        )
        go.touch()
        async with asyncio.timeout(120):
            await turn
    pids = {name: int(next(iter(script.tool_results(1).values())).strip()) for name, script in children.items()}
    assert len(set(pids.values())) == 4
    assert len(ready_for_them) == 2 and ready_for_them <= set(pids.values()), (
        "the queued children should run in the kernels started while they waited"
    )
    assert kernel_processes() == []


async def drain(events: Any) -> None:
    async for _ in events:
        pass


def _kernel_pid(agent: Agent, agent_id: str) -> int | None:
    record = agent.tree.agents.get(agent_id)
    kernel = getattr(record.agent, "kernel", None) if record is not None else None
    return kernel.pid if kernel is not None else None


@pytest.mark.parametrize("pool_size", [1, 0])
async def test_a_responses_task_calls_boot_their_kernels_while_they_wait_for_approval(
    workdir: Path, pool_size: int
) -> None:
    """Three `task` calls in one response, bound 2: before any is approved, a pool that is on has two kernels ready
    or booting for them (not only its one); a pool that is off starts nothing ahead."""
    from freeact_sub import ApprovalRequest

    names = ["a", "b", "c"]
    parent = Script([Call("task", {"prompt": f"CHILD-{name}"}, id=f"task-{name}") for name in names], ["done"])
    model = Router({"PARENT": parent, **{f"CHILD-{name}": Script([f"{name} done"]) for name in names}})
    cfg = AgentConfig(model=model.model, working_dir=workdir, kernel_pool_size=pool_size, max_subagents=2,
                      prestart_pools=True)
    seen: list[int] = []
    async with Agent(cfg) as agent:
        pool = agent.tree.supplies.pool
        await until(lambda: pool.ready == pool_size, "the agent's pool should fill when the agent starts")
        async with asyncio.timeout(120):
            async for event in agent.stream("PARENT"):
                if isinstance(event, ApprovalRequest) and event.tool_name == "task":
                    if not seen:  # the first request: no call of the response is approved yet
                        seen.append(pool.ready + pool.booting)
                    event.approve(True)
    results = parent.tool_results(1)
    assert seen == [2 if pool_size else 0]
    assert sorted(results) == ["task-a", "task-b", "task-c"]
    assert all(f"{name} done" in results[f"task-{name}"] for name in names)
    assert kernel_processes() == []


async def test_a_childs_first_model_request_does_not_wait_for_its_kernel(workdir: Path) -> None:
    """With no kernel ready, a child asks its model while its kernel boots; its first cell waits for the kernel."""
    seen: list[tuple[bool, int | None]] = []
    agent: Agent

    def first_request(messages: list[Any]) -> list[Any]:
        (child,) = [r.agent for r in agent.tree.agents.values() if r.parent_id is not None]
        seen.append((child.kernel.started, child.kernel.pid))
        return [Call("execute_ipython_cell", {"code": "import os\nprint(os.getpid())"})]

    parent = Script([Call("task", {"prompt": "CHILD go"}, id="task-1")], ["done"])
    child = Script(first_request, ["child done"])
    model = Router({"PARENT": parent, "CHILD": child})
    cfg = AgentConfig(model=model.model, working_dir=workdir, auto_approve=True, kernel_pool_size=0)
    async with Agent(cfg) as agent:
        async with asyncio.timeout(120):
            async for _ in agent.stream("PARENT"):
                pass
    assert seen == [(False, None)], "the child's kernel should still be on its way at its first model request"
    printed = int(next(iter(child.tool_results(1).values())).strip())
    assert printed > 0  # the cell ran, in the kernel that arrived meanwhile
    assert kernel_processes() == []


async def test_the_pool_tops_up_only_after_a_childs_first_model_request(workdir: Path) -> None:
    """Between a child taking its pooled kernel and its first model request going out, no kernel boots: a boot's
    set-up runs on the host's event loop (~5-10 ms of CPU) and would hold the request back. Once the request is
    out the pool tops up again."""
    seen: list[tuple[int, int]] = []
    agent: Agent

    def first_request(messages: list[Any]) -> list[Any]:
        pool = agent.tree.supplies.pool
        seen.append((pool.ready, pool.booting))
        return ["child done"]

    parent = Script([Call("task", {"prompt": "CHILD go"}, id="task-1")], ["done"])
    model = Router({"PARENT": parent, "CHILD": Script(first_request)})
    cfg = AgentConfig(model=model.model, working_dir=workdir, auto_approve=True, kernel_pool_size=2,
                      prestart_pools=True)
    async with Agent(cfg) as agent:
        pool = agent.tree.supplies.pool
        await until(lambda: pool.ready == 2, "the agent's pool should fill when the agent starts")
        async with asyncio.timeout(120):
            async for _ in agent.stream("PARENT"):
                pass
        await until(lambda: pool.ready == 2, "the pool should top up after the child's first request")
    assert seen == [(1, 0)], "the child took one kernel and no boot began before its first model request"
    assert kernel_processes() == []


async def test_a_closed_tree_boots_no_kernel_for_a_late_refill(workdir: Path) -> None:
    """Anything that tops the pools up after the main agent stopped (a child's kernel that arrived late, an
    unregistered record) must not boot kernels into the tree's fresh pools: nobody would stop them."""
    parent = Script([Call("task", {"prompt": "CHILD go"}, id="task-1")], ["done"])
    model = Router({"PARENT": parent, "CHILD": Script(["child done"])})
    cfg = AgentConfig(model=model.model, working_dir=workdir, auto_approve=True, kernel_pool_size=2)
    async with Agent(cfg) as agent:
        async for _ in agent.stream("PARENT"):
            pass
        assert agent.tree.running
    tree = agent.tree
    assert not tree.running
    tree.refill(agent.settings)
    tree.unregister("agent-gone")
    await asyncio.sleep(0.2)
    assert (tree.supplies.pool.ready, tree.supplies.pool.booting) == (0, 0)
    assert kernel_processes() == []


async def test_a_caller_that_comes_while_a_cancelled_callers_boot_stops_still_gets_a_kernel(workdir: Path) -> None:
    """A child that ends before its kernel arrives cancels its wait; a boot being stopped brings no kernel, so a
    caller that comes meanwhile must get a boot of its own (it used to wait forever)."""
    made: list[Kernel] = []
    pool = KernelPool(kernel_factory(workdir, made), size=0)
    first = asyncio.create_task(pool.acquire())
    gone = asyncio.create_task(pool.acquire())
    await until(lambda: pool.booting == 2, "a boot for each caller")
    await asyncio.sleep(0.05)  # both boots are under way
    gone.cancel()
    await asyncio.sleep(0)  # its cancellation has begun: one boot is being stopped
    late = asyncio.create_task(pool.acquire())
    try:
        async with asyncio.timeout(60):
            kernels = await asyncio.gather(first, late)
        assert kernels[0] is not kernels[1] and all(k.started for k in kernels)
    finally:
        await asyncio.gather(gone, return_exceptions=True)
        await pool.close()
        await asyncio.gather(*(k.shutdown() for k in made))
    assert kernel_processes() == []


async def test_a_run_without_subagents_starts_no_spare_kernel_and_no_spare_server(
    workdir: Path, calc_server_config: dict[str, Any]
) -> None:
    """The kernel pool and the MCP pool stay cold until a subagent is near; its `task` call warms them. (The
    process's zygote may run already, started by an earlier agent of this process: `test_process_zygote.py`.)"""
    from freeact_sub.kernels.zygote import process_zygote_pids
    from tests.processes import calc_servers, running

    def zygotes() -> set[int]:
        # the kernels the zygote forked (they keep its command line), not the process's zygote itself
        return running("_kernel_zygote.py") - process_zygote_pids()

    parent = Script([Call("execute_ipython_cell", {"code": "print(6 * 7)"})], ["42"],
                    [Call("task", {"prompt": "CHILD go"}, id="task-1")], ["done"])
    model = Router({"PARENT": parent, "CHILD": Script(["child done"])})
    cfg = AgentConfig(model=model.model, working_dir=workdir, auto_approve=True, kernel_pool_size=1,
                      mcp_pool_size=1, mcp_servers={"calc": calc_server_config})
    async with Agent(cfg) as agent:
        async for _ in agent.stream("PARENT: one cell"):
            pass
        await asyncio.sleep(0.3)  # anything started in the background would be on its way by now
        assert agent.kernel is not None and kernel_processes() == [agent.kernel.pid]
        assert zygotes() <= {agent.kernel.pid} and not agent.tree.supplies.warmed
        assert len(calc_servers()) == 1, "only the main agent's own server"

        async for _ in agent.stream("PARENT: one child"):
            pass
        assert agent.tree.supplies.warmed
        await until(lambda: agent.tree.supplies.pool.ready == 1, "the child's task call should fill the pool")
        await until(lambda: agent.tree.supplies.zygote.running, "the child's task call should start the zygote")
    assert zygotes() == set() and kernel_processes() == []
