"""Attacks on the host through the kernel's own protocol: a kernel holds its connection key and may send anything.

One agent (a real kernel, a scripted model) serves the module; each test runs an attack cell through
`Agent.stream()`, as a person's program does, and checks that the run goes on, that the cell's output
says what the host dropped or cut, and that the kernel still answers. A cell forges messages with its
kernel's own session (`get_ipython().kernel.session`), or writes raw frames to its iopub socket.
"""

from __future__ import annotations

import asyncio
import resource

import pytest

from freeact_sub import CodeExecutionOutput
from freeact_sub.kernels.cell_run import KEPT_HEAD, KEPT_TAIL
from tests.scripting import Call, drive, of, shared_agent

pytestmark = pytest.mark.asyncio(loop_scope="module")

shared = shared_agent("protocol")

_FORGE = """
k = get_ipython().kernel
parent = k.get_parent("shell")
def forge(kind, content, parent=parent):
    k.session.send(k.iopub_socket, kind, content, parent=parent)
"""


async def _cell(shared, code: str) -> CodeExecutionOutput:
    agent, script = shared
    script.reset([Call("execute_ipython_cell", {"code": code})], ["done"])
    events = await drive(agent.stream("go"), limit=120)
    [output] = of(CodeExecutionOutput, events)
    return output


async def test_malformed_messages_are_dropped_and_said_and_the_run_goes_on(shared) -> None:
    output = await _cell(
        shared,
        _FORGE
        + """
k.session.send(k.iopub_socket, "stream", "not json at all", parent=parent)         # content that is no JSON
forge("stream", {"name": "stdout", "text": 42})                                    # text of the wrong type
forge("error", {"traceback": [1, 2, 3]})                                           # a traceback of numbers
forge("display_data", {"data": ["not", "a", "mapping"]})                           # data that is no mapping
k.session.send(k.iopub_socket, "stream", b"[" * 200_000 + b"]" * 200_000, parent=parent)  # nested too deep
k.iopub_socket.send_multipart([b"<IDS|MSG>", b"forged", b"{}", b"{}", b"{}", b"{}"])     # a bad signature
print("after the forgeries")
""",
    )
    assert "after the forgeries" in output.content
    assert "dropped 6 malformed messages" in output.content
    assert output.status == "ok"
    assert "still answers" in (await _cell(shared, "print('still answers')")).content


async def test_a_cell_that_announces_its_own_end_is_still_read_to_its_real_end(shared) -> None:
    output = await _cell(
        shared,
        _FORGE
        + """
forge("status", {"execution_state": "idle"})
import time; time.sleep(0.5)
print("DONE-UNSEEN")
""",
    )
    assert "DONE-UNSEEN" in output.content


async def test_output_after_a_forged_end_and_reply_reaches_the_next_cell_as_late_output(shared) -> None:
    # the cell forges both its reply on the shell channel and its idle, then prints from a thread: the reader
    # ends the cell, and what it prints later reaches the record with the next cell, said to be late
    output = await _cell(
        shared,
        _FORGE
        + """
import threading, time
k.session.send(k.shell_stream, "execute_reply", {"status": "ok"}, parent=parent, ident=k._parent_ident["shell"])
forge("status", {"execution_state": "idle"})
def later():
    time.sleep(1)
    forge("stream", {"name": "stdout", "text": "PRINTED-AFTER-THE-END\\n"})
threading.Thread(target=later).start()
""",
    )
    assert "PRINTED-AFTER-THE-END" not in output.content
    await asyncio.sleep(1.5)
    following = await _cell(shared, "print('next')")
    assert "earlier cell" in following.content and "PRINTED-AFTER-THE-END" in following.content
    assert "next" in following.content


async def test_a_flood_keeps_the_head_and_the_tail_and_says_what_was_cut(shared) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    output = await _cell(
        shared,
        """
import sys
sys.stdout.write("HEAD" + "h" * 99 + "\\n")
line = "x" * 99 + "\\n"
for _ in range(40_000):
    sys.stdout.write(line)
print("TAIL-END")
""",
    )
    text = output.content
    assert text.startswith("HEAD") and text.rstrip().endswith("TAIL-END")
    assert "characters of output were cut by the host" in text
    assert len(text) <= KEPT_HEAD + KEPT_TAIL + 200
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # KiB: the flood was not kept


async def test_a_message_over_the_size_bound_is_refused_and_the_kernel_answers_again(shared) -> None:
    output = await _cell(shared, "print('x' * (40 * 1024 * 1024)); print('after big')")
    assert "over 16 MiB" in output.content
    assert len(output.content) < KEPT_HEAD + KEPT_TAIL
    assert "answers again" in (await _cell(shared, "print('answers again')")).content
