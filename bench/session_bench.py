"""The cost of saving sessions, measured in one run on this machine.

    python bench/session_bench.py [--rounds 200] [--messages 1000]

Prints:
- the median time of a trivial round (a scripted model calls `execute_ipython_cell` with
  `x = 1`, the real kernel runs it, the result goes back) for an agent that saves its session
  and one that does not, measured alternately in the same run, and the overhead as a
  percentage of the round (target <= 5 %), and the time spent inside the store per round
  (measured directly, so it does not drown in the machine's noise);
- the median time to load a session of `--messages` messages from disk into a history ready
  for the model (`SessionStore.history`; target <= 200 ms), and to read it as events.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.usage import RequestUsage

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from freeact_sub import Agent, AgentConfig
from freeact_sub.sessions import AgentLog, SessionStore, open_session

SYNC_TIMES: list[float] = []
_sync = AgentLog.sync


def _timed_sync(self: AgentLog, history: Any, *, durable: bool = True) -> None:
    start = time.perf_counter()
    _sync(self, history, durable=durable)
    SYNC_TIMES.append(time.perf_counter() - start)


AgentLog.sync = _timed_sync  # type: ignore[method-assign]  # measure the store's own share of a round


def looping_model() -> FunctionModel:
    """Every request: one cell call (`x = 1`). A round is one model response plus that cell."""
    counter = iter(range(10**9))

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
        yield {0: DeltaToolCall(name="execute_ipython_cell", json_args='{"code": "x = 1"}',
                                tool_call_id=f"call-{next(counter)}")}

    return FunctionModel(stream_function=stream, model_name="bench")


async def round_times(agent: Agent, rounds: int) -> list[float]:
    """Times of `rounds` rounds of one turn (a round ends when its cell's result is in the history)."""
    times: list[float] = []
    last = time.perf_counter()
    from freeact_sub import CodeExecutionOutput, TurnStarted

    async for event in agent.stream("loop", max_turns=rounds):
        if isinstance(event, TurnStarted) and event.turn > 1:
            now = time.perf_counter()
            times.append(now - last)
            last = now
        elif isinstance(event, CodeExecutionOutput):
            pass
    return times


async def overhead(rounds: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        base = {"model": looping_model(), "working_dir": work, "enable_subagents": False, "auto_approve": True}
        saving = Agent(AgentConfig(**base, save_sessions=True))
        plain = Agent(AgentConfig(**base, save_sessions=False))
        with_store: list[float] = []
        without: list[float] = []
        async with saving, plain:
            await round_times(saving, 5)  # warm up both
            await round_times(plain, 5)
            for _ in range(max(1, rounds // 20)):  # alternate, so load on the machine hits both alike
                with_store += await round_times(saving, 21)
                without += await round_times(plain, 21)
        return statistics.median(with_store), statistics.median(without)


def write_session(work: Path, messages: int) -> str:
    store = SessionStore.create(work)
    log = store.agent("agent-bench", model="bench")
    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("a long session")])]
    step = 0
    while len(history) < messages:
        call_id = f"call-{step}"
        code = f"values_{step} = [i * i for i in range({step})]\nprint(sum(values_{step}))"
        history.append(ModelResponse(parts=[TextPart(f"Step {step}: computing."),
                                            ToolCallPart("execute_ipython_cell", {"code": code}, call_id)],
                                     usage=RequestUsage(input_tokens=1000 + step, output_tokens=50)))
        history.append(ModelRequest(parts=[ToolReturnPart("execute_ipython_cell", f"{step * 7}\n" * 5, call_id)]))
        log.sync(history)
        step += 1
    store.close()
    return store.session_id


def load_times(messages: int, repeats: int = 15) -> tuple[int, float, float]:
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        session_id = write_session(work, messages)
        history_times, event_times = [], []
        loaded = 0
        for _ in range(repeats):
            start = time.perf_counter()
            store = SessionStore.open(work, session_id)
            loaded = len(store.history("agent-bench"))
            store.close()
            history_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            open_session(session_id, work).events("agent-bench")
            event_times.append(time.perf_counter() - start)
        return loaded, statistics.median(history_times), statistics.median(event_times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--messages", type=int, default=1000)
    args = parser.parse_args()

    with_store, without = asyncio.run(overhead(args.rounds))
    extra = with_store - without
    print(f"trivial round (cell `x = 1`), median: without a store {without * 1000:.2f} ms, "
          f"with a store {with_store * 1000:.2f} ms")
    print(f"persistence overhead per round: {extra * 1000:+.3f} ms = {extra / without * 100:+.1f} % (target <= 5 %)")
    per_round = statistics.median(SYNC_TIMES) * 2  # a round saves twice: the response, then the results
    print(f"time spent in the store per round (2 x median sync): {per_round * 1000:.3f} ms = "
          f"{per_round / without * 100:.1f} % of the round")
    loaded, history_time, event_time = load_times(args.messages)
    print(f"load a session of {loaded} messages into a model-ready history: {history_time * 1000:.1f} ms "
          f"(target <= 200 ms); read it as events: {event_time * 1000:.1f} ms")


if __name__ == "__main__":
    main()
