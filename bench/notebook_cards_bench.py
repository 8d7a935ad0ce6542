"""What keeping waiting cards in place costs the notebook's widgets (issue 40, item 34): a run whose `task` calls all
wait, answered one by one (each answer starts a child that asks for a cell while the later calls still wait), with the
placement (`notebook/_order.py`: where a child's panel goes, when an answered card gives up its room) against the same
run with that placement switched off (every panel nested at once, answered buttons dropped at once: the old way).

    python -m bench.notebook_cards_bench [--children 50] [--pairs 3]

Only the widget tree in this process is measured (real ipywidgets, no front end, no agent): the host's CPU time
(`time.process_time()`) to show the run's events, runs alternated so that the machine's load falls on both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from freeact_sub import ApprovalPolicy, ApprovalRequest, SubagentStarted
from freeact_sub.notebook import _order
from freeact_sub.notebook.run_panel import RunPanel

__all__ = ["measure"]


def _task(index: int, waiting: bool) -> ApprovalRequest:
    return ApprovalRequest(
        agent_id="agent-main",
        tool_name="task",
        tool_args={"prompt": f"job {index}"},
        tool_call_id=f"t{index}",
        auto_approved=not waiting,
    )


def _cell(child: str, waiting: bool) -> ApprovalRequest:
    return ApprovalRequest(
        agent_id=child,
        tool_name="execute_ipython_cell",
        tool_args={"code": "print(1)"},
        tool_call_id=f"{child}-c",
        auto_approved=not waiting,
    )


def _run(children: int, waiting: bool) -> float:
    """CPU seconds to show one run of `children` children, every card answered."""
    started = time.process_time()
    run = RunPanel("agent-main", "many jobs", policy=ApprovalPolicy(), on_stop=lambda: None)
    for index in range(children):
        run.handle(_task(index, waiting))
    for index in range(children):
        call = run.main.calls[f"t{index}"]
        if call.approval is not None:
            call.approval.approve_button.click()
        child = f"agent-{index:04d}"
        run.handle(
            SubagentStarted(
                agent_id="agent-main", subagent_id=child, tool_call_id=f"t{index}", prompt="job", max_turns=5
            )
        )
        run.handle(_cell(child, waiting))
    for index in range(children):
        cell = run.panels[f"agent-{index:04d}"].calls[f"agent-{index:04d}-c"]
        if cell.approval is not None:
            cell.approval.approve_button.click()
    run.end("done")
    return time.process_time() - started


async def measure(children: int = 50, pairs: int = 3) -> dict[str, float]:
    """Median CPU seconds of the waiting run with the placement and without it, and their ratio."""
    placed, unplaced = [], []
    real = _order.waits_after, _order.release_answered
    try:
        for _ in range(pairs):
            _order.waits_after, _order.release_answered = real
            placed.append(_run(children, waiting=True))
            _order.waits_after = lambda root, anchor: False
            _order.release_answered = lambda root: None  # (the answered cards' inert buttons then stay: a bound)
            unplaced.append(_run(children, waiting=True))
    finally:
        _order.waits_after, _order.release_answered = real
    result = {"placed_s": statistics.median(placed), "unplaced_s": statistics.median(unplaced)}
    result["ratio"] = result["placed_s"] / result["unplaced_s"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=50)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    result = asyncio.run(measure(args.children, args.pairs))
    print(
        f"{args.children} children, {args.pairs} pairs: cards kept in place {result['placed_s'] * 1000:.0f} ms CPU, "
        f"without {result['unplaced_s'] * 1000:.0f} ms CPU, ratio {result['ratio']:.2f}"
    )


if __name__ == "__main__":
    main()
