"""The notebook and the subagent lifecycle: a child's own Stop button, tokens in each panel, and a background
subagent whose panel stays live (and asks) after the cell that started it returned.

A real agent with real kernels and a scripted model; `Button.click()` runs the handlers a browser click runs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from freeact_sub import Agent
from freeact_sub.notebook import AgentView
from freeact_sub.notebook.agent_panel import AgentPanel
from tests.scripting import Block, Call, Router, Script, configs, until

pytestmark = pytest.mark.timeout(120)


config = configs(kernel_pool_size=0, mcp_pool_size=0)


def panel_of(view: AgentView, agent_id: str) -> AgentPanel:
    assert view.panel is not None
    return view.panel.panels[agent_id]


async def test_a_childs_stop_button_stops_it_alone_and_panels_show_tokens(workdir: Path) -> None:
    main = Script([Call("task", {"prompt": "[slow] wait"}, id="t-slow"), Call("task", {"prompt": "[quick] go"})],
                  ["main done"])
    slow = Script([Block()])
    quick = Script(["quick answer"])
    router = Router({"[main]": main, "[slow]": slow, "[quick]": quick})
    async with Agent(config(router.model, workdir, auto_approve=True)) as agent:
        view = AgentView(agent, auto_approve=False)
        task = view.start("[main] two children")
        await until(lambda: any(i.prompt == "[slow] wait" and i.turns == 1 for i in agent.subagents()), "slow works")
        slow_id = next(i.agent_id for i in agent.subagents() if i.prompt == "[slow] wait")
        button = panel_of(view, slow_id).stop_button
        assert button is not None and view.panel is not None and view.panel.main.stop_button is None
        button.click()
        await task
        assert panel_of(view, slow_id).state == "cancelled" and button.disabled
        assert view.panel.main.state == "done" and view.answer == "main done"
        assert "user stopped" in main.tool_results(1)["t-slow"].lower()
        for panel in view.panel.panels.values():
            if panel.agent_id != slow_id:
                assert panel.tokens > 0 and "tokens" in panel._header.value
        # the run's header sums every agent's tokens (the scripted model has no price: its cost is unknown)
        total = sum(panel.tokens for panel in view.panel.panels.values())
        assert view.panel.usage.total_tokens == total > 0 and view.panel.usage.requests >= 3
        assert f"{total:,} tokens · cost unknown" in view.panel.usage_line.value


async def test_a_background_subagent_asks_in_a_panel_that_stays_live_after_the_cell(workdir: Path) -> None:
    release = asyncio.Event()
    main = Script([Call("task", {"prompt": "[bg] job", "run_in_background": True})], ["it runs on"])
    bg = Script([Block(release), Call("execute_ipython_cell", {"code": "print(7)"})], ["seven"])
    router = Router({"[main]": main, "[bg]": bg})
    async with Agent(config(router.model, workdir)) as agent:
        agent.approvals.always(agent.agent_id)
        view = AgentView(agent, auto_approve=False)
        await view.start("[main] start it")
        assert view.panel is not None and view.panel.state == "done"
        (info,) = agent.subagents()
        child = panel_of(view, info.agent_id)
        assert not child.finished  # the run ended; the background child's panel did not
        release.set()
        await until(lambda: any(c.pending for c in child.calls.values()), "the child's question after the cell")
        next(c for c in child.calls.values() if c.pending).approval.approve_button.click()
        await until(lambda: child.finished, "the background child should finish")
        assert child.state == "done" and child.tokens > 0


async def test_a_grandchilds_panel_nests_inside_its_parents_panel_and_stops_alone(workdir: Path) -> None:
    main = Script([Call("task", {"prompt": "[mid] delegate"}, id="t-mid")], ["main done"])
    mid = Script([Call("task", {"prompt": "[leaf] wait"}, id="t-leaf")], ["mid done without its leaf"])
    leaf = Script([Block()])
    router = Router({"[main]": main, "[mid]": mid, "[leaf]": leaf})
    async with Agent(config(router.model, workdir, auto_approve=True, max_depth=2)) as agent:
        view = AgentView(agent, auto_approve=False)
        task = view.start("[main] nest")
        await until(lambda: any(i.prompt == "[leaf] wait" and i.turns == 1 for i in agent.subagents()), "leaf works")
        ids = {i.prompt: i.agent_id for i in agent.subagents()}
        mid_panel, leaf_panel = panel_of(view, ids["[mid] delegate"]), panel_of(view, ids["[leaf] wait"])
        assert view.panel is not None
        # the widget tree: main panel > its task call > the child's panel > its task call > the grandchild's panel
        main_call = view.panel.main.calls["t-mid"]
        assert main_call._subagents.children == (mid_panel,)
        mid_call = mid_panel.calls["t-leaf"]
        assert mid_call._subagents.children == (leaf_panel,)
        assert mid_call in mid_panel._body.children
        assert leaf_panel not in view.panel.children and mid_panel not in view.panel.children
        assert leaf_panel.subagent and "freeact-subagent" in leaf_panel._dom_classes
        assert leaf_panel.stop_button is not None
        leaf_panel.stop_button.click()  # the grandchild alone: its parent is told and goes on
        await task
        assert leaf_panel.state == "cancelled" and mid_panel.state == "done" and view.panel.main.state == "done"
        assert "user stopped" in mid.tool_results(1)["t-leaf"].lower()
        assert main.tool_results(1)["t-mid"] == "mid done without its leaf"
        # the static copy walks the same tree: the leaf's panel comes after (inside) the mid's
        html = view.panel.static_html()
        assert html.index(f"freeact-panel-{ids['[mid] delegate']}") < html.index(f"freeact-panel-{ids['[leaf] wait']}")
