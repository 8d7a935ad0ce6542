"""One fan-out's critical path, child by child: when each child's `task` call ran, took its slot, got its kernel
(ready in the pool or waited for), sent its first model request, sent its cell, the kernel began and ended the
cell (the kernel's own clock), the host had the cell's result, the child answered, its kernel was gone and its
slot free; and when the pool booted kernels, and how late the host's event loop ran its callbacks.

    python bench/fan_out_trace.py [--row 10] [--runs 3] [--baseline DIR]
    python bench/fan_out_trace.py --row 10 --children     # one run: every child's marks and the pool's boots

Rows as `fan_out_pairs.py`'s function rows (`10`: 10 x 1 s, bound 5; `50`; `200`; `30`). Each run is a process of
its own; with `--baseline DIR` (a `freeact_sub` as `fan_out_pairs.py` takes it) the two codes alternate. The
instruments wrap methods in that process only (the product is not changed); each cell prints the kernel's clock as
it begins and ends (one output message a cell). Prints the median milliseconds of each span of a child's life, for
the first wave's children and the later ones', the pool's boot time, and how late the host's loop woke up in all
(a task sleeping 1 ms; later than 2 ms counted).
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
if "--root" in sys.argv:  # the `freeact_sub` traced: a baseline's, else this checkout's
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--root") + 1]).resolve()))

ROWS = {"10": (10, 5, 1.0), "50": (50, 10, 0.5), "200": (200, 20, 0.5), "30": (30, 10, 0.5)}

marks: dict[str, dict[str, float]] = defaultdict(dict)
"""Per child id (or `call:<tool call id>` before it has one): phase -> time.time()."""
pool_boots: list[tuple[float, float]] = []
prompt_of: dict[str, str] = {}
"""A child's id by its prompt (`child i`): the model's marks are by prompt."""
lags: list[tuple[float, float]] = []
"""(when, how late) of the loop monitor's wake-ups later than 2 ms."""


_stopping: contextvars.ContextVar[str] = contextvars.ContextVar("stopping", default="")
"""The label of the kernel whose shutdown runs (for the marks of its parts)."""


def _mark(key: str, phase: str, at: float | None = None) -> None:
    key = prompt_of.get(key, key)
    marks[key].setdefault(phase, time.time() if at is None else at)


def _task_child() -> str | None:
    task = asyncio.current_task()
    name = task.get_name() if task is not None else ""
    return name.split(":", 1)[1] if name.startswith("task:") else None


@contextmanager
def instruments() -> Iterator[None]:
    """Wrap the methods whose moments are traced; undone on exit."""
    from freeact_sub.agent import agent as agent_module
    from freeact_sub.agent.agent import Agent
    from freeact_sub.kernels import local as kernel_module
    from freeact_sub.kernels.local import Kernel
    from freeact_sub.kernels.pool import KernelPool
    from freeact_sub.subagents.runner import SubagentRunner
    from freeact_sub.tree.registry import AgentTree
    from freeact_sub.tree.supplies import Supplies

    undo: list[Callable[[], None]] = []

    def wrap(owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        original = getattr(owner, name)
        setattr(owner, name, make(original))
        undo.append(lambda: setattr(owner, name, original))

    def run(original: Any) -> Any:
        async def traced(self: Any, tool_call_id: str, *args: Any, **kwargs: Any) -> Any:
            _mark(f"call:{tool_call_id}", "task call")
            return await original(self, tool_call_id, *args, **kwargs)

        return traced

    def new_child(original: Any) -> Any:
        def traced(self: Any, spec: Any) -> Any:
            child = original(self, spec)
            marks[child.agent_id].update(marks.pop(f"call:{spec.tool_call_id}", {}))
            prompt_of[spec.prompt] = child.agent_id
            return child

        return traced

    class Slots(asyncio.Semaphore):
        async def acquire(self) -> Literal[True]:
            if (child := _task_child()) is not None:
                _mark(child, "slot asked")
            got = await super().acquire()
            if child is not None:
                _mark(child, "slot taken")
            return got

        def release(self) -> None:
            if (child := _task_child()) is not None:
                _mark(child, "slot freed")
            super().release()

    def renew(original: Any) -> Any:
        def traced(self: Any) -> None:
            original(self)
            self.bound = Slots(self.config.max_subagents)

        return traced

    def acquire_kernel(original: Any) -> Any:
        async def traced(self: Any, agent_id: str, sandbox: Any, **kwargs: Any) -> Any:
            if kwargs.get("is_child"):
                _mark(agent_id, "kernel asked")
                marks[agent_id]["pool ready"] = float(self.pool.ready)
            kernel = await original(self, agent_id, sandbox, **kwargs)
            if kwargs.get("is_child"):
                _mark(agent_id, "kernel got")
            return kernel

        return traced

    def boot(original: Any) -> Any:
        async def traced(self: Any) -> None:
            began = time.time()
            try:
                await original(self)
            finally:
                pool_boots.append((began, time.time()))

        return traced

    def start(original: Any) -> Any:
        async def traced(self: Any, *args: Any, **kwargs: Any) -> None:
            if self.is_subagent:
                _mark(self.agent_id, "start")
            await original(self, *args, **kwargs)
            if self.is_subagent:
                _mark(self.agent_id, "started")

        return traced

    def stop(original: Any) -> Any:
        async def traced(self: Any) -> None:
            if self.is_subagent:
                _mark(self.agent_id, "stop")
            await original(self)
            if self.is_subagent:
                _mark(self.agent_id, "stopped")

        return traced

    def prompt(original: Any) -> Any:
        def traced(settings: Any, definition: Any, tool_names: Any, parts: Any, files: Any = None) -> str:
            text = original(settings, definition, tool_names, parts, files)
            if (child := _task_child()) is not None:
                _mark(child, "prompt built")
            return text

        return traced

    def kernel_run(original: Any) -> Any:
        async def traced(self: Any, cell: Any, notice: str = "", *, set_up: bool = False) -> Any:
            if not set_up:
                _mark(self.label, "cell sent")
            result = await original(self, cell, notice, set_up=set_up)
            if not set_up:
                _mark(self.label, "cell done")
            return result

        return traced

    def shutdown(original: Any) -> Any:
        async def traced(self: Any, *, now: bool = False) -> None:
            label = self.label
            _stopping.set(label)
            _mark(label, "kernel stop")
            await original(self, now=now)
            _mark(label, "kernel gone")

        return traced

    def stop_process(original: Any) -> Any:
        async def traced(manager: Any, now: bool) -> None:
            await original(manager, now)
            if label := _stopping.get():
                _mark(label, "process gone")

        return traced

    def release(original: Any) -> Any:
        def traced(guard: Any, folder: Any) -> None:
            if label := _stopping.get():
                _mark(label, "release")
            original(guard, folder)

        return traced

    wrap(SubagentRunner, "run", run)
    wrap(AgentTree, "new_child", new_child)
    wrap(AgentTree, "_renew", renew)
    wrap(Supplies, "acquire_kernel", acquire_kernel)
    wrap(KernelPool, "_boot", boot)
    wrap(Agent, "start", start)
    wrap(Agent, "stop", stop)
    wrap(agent_module, "system_prompt", prompt)
    wrap(Kernel, "_run", kernel_run)
    wrap(Kernel, "shutdown", shutdown)
    wrap(kernel_module, "stop_process", stop_process)
    wrap(kernel_module, "_release", release)
    try:
        yield
    finally:
        for step in reversed(undo):
            step()


def _script(children: int, cell: float) -> Any:
    from pydantic_ai.messages import ToolReturnPart
    from pydantic_ai.models.function import DeltaToolCall

    from bench.spawning import first_prompt

    # the kernel's clock as the cell begins and ends, printed at its end (one output message)
    code = f"import time as _t; _b = _t.time(); _t.sleep({cell}); print('clock', _b, _t.time())"

    async def script(messages: Any, info: Any) -> Any:
        prompt = first_prompt(messages)
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if prompt.startswith("child"):
            _mark(prompt, "model 2" if returns else "model 1")
            if returns:
                text = str(returns[-1].content)
                if "clock" in text:
                    _, began, ended = text[text.index("clock") :].split()[:3]
                    _mark(prompt, "kernel began", float(began))
                    _mark(prompt, "kernel ended", float(ended))
                yield "child done"
            else:
                yield {
                    0: DeltaToolCall(
                        name="execute_ipython_cell", json_args=json.dumps({"code": code}), tool_call_id="cell"
                    )
                }
        elif returns:
            yield "parent done"
        else:
            yield {
                i: DeltaToolCall(name="task", tool_call_id=f"task-{i}", json_args=json.dumps({"prompt": f"child {i}"}))
                for i in range(children)
            }

    return script


async def _lag_monitor(stop: asyncio.Event) -> None:
    while not stop.is_set():
        before = time.perf_counter()
        await asyncio.sleep(0.001)
        late = time.perf_counter() - before - 0.001
        if late > 0.002:
            lags.append((time.time(), late))


async def traced_run(children: int, bound: int, cell: float) -> dict[str, Any]:
    """One fan-out with the instruments on: each child's marks (relative to the turn's start, seconds), the pool's
    boots, the loop's lateness."""
    import tempfile

    from pydantic_ai.models.function import FunctionModel

    from bench.spawning import wait_for_pool
    from freeact_sub import Agent, AgentConfig, Response

    marks.clear()
    prompt_of.clear()
    pool_boots.clear()
    lags.clear()
    with tempfile.TemporaryDirectory() as work:
        config = AgentConfig(
            model=FunctionModel(stream_function=_script(children, cell)),
            working_dir=Path(work),
            max_subagents=bound,
            auto_approve=True,
        )
        async with Agent(config) as agent:
            await wait_for_pool(agent)
            pool_boots.clear()
            stop = asyncio.Event()
            monitor = asyncio.create_task(_lag_monitor(stop))
            began = time.time()
            ended = began
            async for event in agent.stream("fan out"):
                if isinstance(event, Response) and event.final:
                    if event.agent_id == agent.agent_id:
                        ended = event.at
                    else:
                        _mark(event.agent_id, "answered", event.at)
            stop.set()
            await monitor
    children_marks = {agent_id: dict(phases) for agent_id, phases in marks.items() if "slot taken" in phases}
    return {"began": began, "ended": ended, "children": children_marks, "boots": list(pool_boots), "lags": list(lags)}


PHASES = (
    "task call|slot taken|start|kernel asked|prompt built|started|model 1|cell sent|kernel got|kernel began|"
    "kernel ended|cell done|model 2|answered|stop|kernel stop|process gone|release|kernel gone|stopped|slot freed"
).split("|")


SPANS = {  # name: (from, to), each a child's own marks
    "slot -> first model request": ("slot taken", "model 1"),
    "kernel asked -> got (waits for a boot)": ("kernel asked", "kernel got"),
    "first model request -> cell sent": ("model 1", "cell sent"),
    "cell sent -> cell began (kernel)": ("cell sent", "kernel began"),
    "cell ended (kernel) -> result": ("kernel ended", "cell done"),
    "result -> answer": ("cell done", "answered"),
    "answer -> kernel killed": ("answered", "kernel stop"),
    "kernel killed -> process gone": ("kernel stop", "process gone"),
    "process gone -> shutdown returned": ("process gone", "kernel gone"),
    "kernel gone -> slot freed": ("kernel gone", "slot freed"),
    "in slot beyond the cell": ("slot taken", "slot freed"),
}


def summarize(run: dict[str, Any], bound: int, cell: float) -> dict[str, float]:
    """Milliseconds: the wall time, and each span's median over the first wave's children and over the later ones'."""
    kids = sorted(run["children"].values(), key=lambda m: m.get("slot taken", 0.0))
    result = {"wall": 1000 * (run["ended"] - run["began"])}
    for name, members in (("first wave", kids[:bound]), ("later waves", kids[bound:])):
        for span, (a, b) in SPANS.items():
            values = [1000 * (m[b] - m[a]) for m in members if a in m and b in m]
            if span == "in slot beyond the cell":
                values = [v - 1000 * cell for v in values]
            if values:
                result[f"{name}: {span}"] = statistics.median(values)
    boots = [1000 * (b - a) for a, b in run["boots"]]
    result["pool boot (each)"] = statistics.median(boots) if boots else 0.0
    result["loop late, in all"] = 1000 * sum(d for _, d in run["lags"])
    return result


def print_children(run: dict[str, Any]) -> None:
    """Every child's marks, ms from the turn's start, in the order they took their slots; then the pool's boots."""
    began = run["began"]
    for m in sorted(run["children"].values(), key=lambda m: m.get("slot taken", 0.0)):
        print("  " + " ".join(f"{p}={1000 * (m[p] - began):.0f}" for p in PHASES if p in m))
    print(
        "  pool boots (ms): " + ", ".join(f"{1000 * (a - began):.0f}-{1000 * (b - began):.0f}" for a, b in run["boots"])
    )


async def one_run(row: str, show_children: bool) -> dict[str, float]:
    """One traced run of `row` in this process (after a small fan-out that pays the process's one-time costs)."""
    from bench.fan_out_runs import fan_out_run

    children, bound, cell = ROWS[row]
    await fan_out_run(3, 3, 0.0)
    with instruments():
        run = await traced_run(children, bound, cell)
    if show_children:
        print_children(run)
    return summarize(run, bound, cell)


def _in_process(row: str, root: str | None) -> dict[str, float]:
    command = [sys.executable, __file__, "--one", row, *(["--root", root] if root else [])]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(row: str, runs: int, baseline: str | None) -> None:
    labels = ["baseline", "this code"] if baseline else ["this code"]
    found: dict[str, list[dict[str, float]]] = {label: [] for label in labels}
    for run in range(runs):
        for label in labels if run % 2 == 0 else labels[::-1]:
            found[label].append(_in_process(row, baseline if label == "baseline" else None))
    children, bound, cell = ROWS[row]
    print(f"{children} x {cell:g} s, bound {bound}: medians of {runs} runs, ms" + (" (alternated)" if baseline else ""))
    keys = list(dict.fromkeys(key for results in found.values() for r in results for key in r))
    print(f"  {'':<62}" + "".join(f"{label:>12}" for label in labels))
    for key in keys:
        cells = []
        for label in labels:
            values = [r[key] for r in found[label] if key in r]
            cells.append(f"{statistics.median(values):12.1f}" if values else f"{'-':>12}")
        print(f"  {key:<62}" + "".join(cells))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--row", default="10", choices=sorted(ROWS))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", metavar="DIR", help="also trace the freeact_sub in DIR, alternated run by run")
    parser.add_argument("--children", action="store_true", help="print every child's marks (one run, this code)")
    parser.add_argument("--root", metavar="DIR", help=argparse.SUPPRESS)  # read above, before the imports
    parser.add_argument("--one", metavar="ROW", help=argparse.SUPPRESS)  # one run, as JSON
    options = parser.parse_args()
    if options.one:
        print(json.dumps(asyncio.run(one_run(options.one, False))))
    elif options.children:
        asyncio.run(one_run(options.row, True))
    else:
        main(options.row, options.runs, options.baseline)
