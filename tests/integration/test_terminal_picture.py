"""The terminal's pictures in the docs (`docs/terminal-dark.svg`, `docs/terminal-light.svg`): a run with a cell
and two subagents, drawn by the terminal's own renderer at 100 columns in the dark and the light theme, and
saved by rich as SVG. Every run writes them to `test-artifacts/`; with `FREEACT_SUB_UPDATE_DOCS_PICTURES=1` they
replace the docs' copies. The test checks what the pictures must show, so a stale one is caught.

A real `Agent` (kernels, scripted model); the run is drawn twice from its events.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest
from rich.console import Console
from rich.terminal_theme import DEFAULT_TERMINAL_THEME, SVG_EXPORT_THEME

from freeact_sub import Agent, AgentConfig, AgentEvent
from freeact_sub.terminal.session import Session
from freeact_sub.terminal.theme import theme_for
from tests.scripting import Call, Router, Script

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(180)

FONT_FACE = re.compile(r"@font-face\s*\{[^}]*\}")
ANSWER = "Both jobs are done: **17984** primes below 200,000, and π ≈ **3.1416**."


def drawn(events: list[AgentEvent], agent: Agent, background: str) -> str:
    console = Console(record=True, width=100, force_terminal=True, color_system="truecolor", file=io.StringIO())
    session = Session(agent, console, ask_keys=False, theme=theme_for(background))  # type: ignore[arg-type]
    for event in events:
        session.renderer.handle(event)
    terminal = DEFAULT_TERMINAL_THEME if background == "light" else SVG_EXPORT_THEME
    svg = console.export_svg(title="freeact-sub", theme=terminal)
    return FONT_FACE.sub("", svg)  # rich links Fira Code from a CDN: the docs load nothing from the network


async def test_the_terminal_pictures_show_a_run_with_subagents_in_both_themes(workdir: Path) -> None:
    main = Script(
        [Call("execute_ipython_cell", {"code": "import sys\nprint(sys.version.split()[0])"}, id="c1")],
        [
            Call(
                "task",
                {"prompt": "Count the primes below 200,000 with a sieve", "description": "Count primes"},
                id="t1",
            ),
            Call("task", {"prompt": "Estimate π with the Leibniz series", "description": "Estimate π"}, id="t2"),
        ],
        [ANSWER],
    )
    primes = Script(
        [
            Call(
                "execute_ipython_cell",
                {
                    "code": "n = 200_000\nsieve = bytearray([1]) * n\nsieve[:2] = b'\\x00\\x00'\n"
                    "for i in range(2, int(n**0.5) + 1):\n    if sieve[i]:\n"
                    "        sieve[i*i::i] = bytes(len(range(i*i, n, i)))\n"
                    "print(sum(sieve))"
                },
                id="p1",
            )
        ],
        ["There are **17984** primes below 200,000."],
    )
    pi = Script(
        [
            Call(
                "execute_ipython_cell",
                {"code": "import math\nprint(round(4 * sum((-1) ** k / (2 * k + 1) for k in range(100_000)), 4))"},
                id="q1",
            )
        ],
        ["π ≈ **3.1416**."],
    )
    model = Router({"with a sieve": primes, "Leibniz": pi, "": main}).model
    config = AgentConfig(model=model, working_dir=workdir, kernel_pool_size=0, mcp_pool_size=0, auto_approve=True)
    async with Agent(config) as agent:
        events = [event async for event in agent.stream("Count the primes below 200,000 and estimate π, in parallel")]
        pictures = {background: drawn(events, agent, background) for background in ("dark", "light")}
    out = ROOT / "test-artifacts"
    out.mkdir(exist_ok=True)
    for background, svg in pictures.items():
        text = re.sub(r"<[^>]+>", "", svg).replace("&#160;", " ")
        assert "17984" in text and "3.1416" in text  # the children's outputs and the answer
        assert len(set(re.findall(r"agent-[0-9a-f]{4}", text))) == 3  # the main agent and its two subagents
        (out / f"terminal-{background}.svg").write_text(svg, encoding="utf-8")
        if os.environ.get("FREEACT_SUB_UPDATE_DOCS_PICTURES") == "1":
            (ROOT / "docs" / f"terminal-{background}.svg").write_text(svg, encoding="utf-8")
    assert not any(re.search(r"url\(\s*[\"']?https?:", svg) or "@font-face" in svg for svg in pictures.values())
    assert "#ffffff" in pictures["light"] and "#292929" in pictures["dark"]  # each on its own background
