"""Limits per agent, enforced by the OS: a cell that takes too much memory, too many processes or too long is
refused with a message naming the limit, its kernel lives on (state kept), and the agent goes on.

One tree: the main agent's kernel (launched) allocates past `memory` and spins past `cell_time`; its child's
kernel (forked, from the pool) forks past `processes`. The host's own memory does not move.
"""

from __future__ import annotations

import resource
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from freeact_sub import Agent, AgentConfig, CodeExecutionOutput
from freeact_sub.sandbox import platform_problem
from freeact_sub.sandbox.limits import KernelCgroup, Limits, limit_gaps
from tests.scripting import Call, Router, Script, drive, of

pytestmark = pytest.mark.skipif(platform_problem() is not None, reason=f"no sandbox here: {platform_problem()}")

TIGHT = {"name": "tight", "network": False, "memory": "384MiB", "processes": 40, "cell_time": 5}

ALLOCATE = "kept = 'state'\nblock = bytearray(2 * 1024**3)"
SPIN = "while True:\n    pass"
SHARED = """import mmap
size = 1536 * 1024**2
shared = mmap.mmap(-1, size, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)  # RLIMIT_DATA does not count it
chunk = b"x" * 2**20
for offset in range(0, size, 2**20):
    shared[offset:offset + 2**20] = chunk
print('wrote', size)
"""
FORK = """import os, time
children = []
try:
    for _ in range(200):
        pid = os.fork()
        if pid == 0:
            time.sleep(3)
            os._exit(0)
        children.append(pid)
finally:
    print('forked', len(children))
    for pid in children:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
"""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def limited(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("limits")
    router = Router({
        "MAIN": Script([Call("execute_ipython_cell", {"code": ALLOCATE}, id="m1")],
                       [Call("execute_ipython_cell", {"code": SPIN}, id="m2")],
                       [Call("execute_ipython_cell", {"code": "print('alive', kept)"}, id="m3")],
                       [Call("execute_ipython_cell", {"code": SHARED}, id="m4")],
                       [Call("execute_ipython_cell", {"code": "print('goes on')"}, id="m5")],
                       [Call("task", {"prompt": "CHILD forks"}, id="t1")],
                       ["main done"]),
        "CHILD": Script([Call("execute_ipython_cell", {"code": FORK}, id="c1")],
                        [Call("execute_ipython_cell", {"code": "print('child alive')"}, id="c2")],
                        ["child done"]),
    })
    config = AgentConfig(model=router.model, working_dir=work, auto_approve=True, kernel_pool_size=1,
                         execution_timeout=60, sandbox=TIGHT)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    async with Agent(config) as agent:
        events = await drive(agent.stream("MAIN limits"))
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    outputs = {output.tool_call_id: output for output in of(CodeExecutionOutput, events)}
    yield {"outputs": outputs, "host_growth_kib": after - before}


def test_a_cell_past_memory_fails_and_the_kernel_keeps_its_state(limited: dict[str, Any]) -> None:
    output = limited["outputs"]["m1"]
    assert output.status == "error" and "MemoryError" in output.content
    assert "[sandbox] The profile 'tight' limits each process of this kernel to 384 MiB of memory (memory)" \
        in output.content
    assert "alive state" in limited["outputs"]["m3"].content  # the same kernel, its variable kept
    assert limited["host_growth_kib"] < 200 * 1024  # the 2 GiB were never the host's


def test_a_cell_past_its_time_is_stopped_with_the_limit_named(limited: dict[str, Any]) -> None:
    output = limited["outputs"]["m2"]
    assert output.status == "timeout"
    assert "[sandbox] This cell ran past the time limit of the profile 'tight' (cell_time: 5 s)" in output.content


def test_a_cell_past_processes_is_refused_and_the_agent_goes_on(limited: dict[str, Any]) -> None:
    output = limited["outputs"]["c1"]
    if limit_gaps(Limits(processes=40, memory=None)):  # root, no pids cgroup to make: the banner says so
        assert "forked 200" in output.content
        pytest.skip("processes cannot be limited here (root, and no pids cgroup can be made)")
    forked = int(output.content.split("forked ", 1)[1].split()[0])
    assert 0 < forked < 40  # the kernel's own threads count too
    assert "[sandbox] The profile 'tight' limits this kernel to 40 processes and threads (processes)" in output.content
    assert "child alive" in limited["outputs"]["c2"].content


def test_shared_memory_past_the_limit_is_stopped_where_a_memory_cgroup_can_be_made(limited: dict[str, Any]) -> None:
    probe = KernelCgroup(None, 384 * 1024**2)
    memory_cgroup = "memory" in probe.paths
    probe.close()
    output = limited["outputs"]["m4"]
    if not memory_cgroup:  # RLIMIT_DATA alone: shared memory is not counted (the README says so)
        assert "wrote" in output.content
        pytest.skip("no memory cgroup can be made here: shared memory is not limited")
    assert "wrote" not in output.content and output.status == "kernel_died"
    assert "[sandbox] The profile 'tight' limits this kernel's processes together to 384 MiB of memory (memory); " \
           "past it one of them was stopped, the kernel itself: it was restarted" in output.content
    assert "goes on" in limited["outputs"]["m5"].content  # a new kernel, and the agent went on
