"""What installed skills cost every request: the first request's size with 20 skills against none.

    python bench/skills_bench.py [--skills 20]

Starts a main agent (scripted model, no kernel: `tools=["load_skill", "task"]`) in a folder with no
skills, then in one with N skills (a name and a one-sentence description each, a body of 2,000
characters), and measures what the model's first request carries: the system prompt and the tool
definitions, in characters and in tokens estimated as characters / 4 (the measure the demo server
reports usage with). The bodies are not sent until the model asks for one (`load_skill`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from freeact_sub import Agent, AgentConfig
from tests.scripting import Script, drive

WORDS = ("report", "invoice", "deploy", "release", "migrate", "chart", "review", "triage", "benchmark", "backup")


def install(folder: Path, count: int) -> None:
    """`count` skills in `folder/.freeact-sub/skills`, each with a realistic description and a long body."""
    for number in range(count):
        name = f"{WORDS[number % len(WORDS)]}-{number}"
        skill = folder / ".freeact-sub" / "skills" / name
        skill.mkdir(parents=True)
        description = (f"Prepare a {WORDS[number % len(WORDS)]} the way this team does it: the steps, the checks "
                       "and the templates. Use when asked for one.")
        body = ("Step. " * 333)[:2000]
        (skill / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {json.dumps(description)}\n---\n{body}\n")


async def first_request(folder: Path) -> dict[str, Any]:
    """The characters of the first request's system prompt and tool definitions."""
    script = Script(["done"])
    config = AgentConfig(model=script.model, working_dir=folder, tools=["load_skill", "task"], auto_approve=True,
                         kernel_pool_size=0, mcp_pool_size=0, save_sessions=False, images_dir=".")
    async with Agent(config, trust_project=True) as agent:
        await drive(agent.stream("hello"))
        prompt = agent.system_prompt
    tools = json.dumps([tool.__dict__ for tool in script.infos[0].function_tools], default=str)
    return {"system_prompt": len(prompt), "tools": len(tools), "total": len(prompt) + len(tools)}


async def main(count: int) -> None:
    os.environ["HOME"] = tempfile.mkdtemp(prefix="skills-bench-home-")  # no skills of the person's own
    with tempfile.TemporaryDirectory() as empty, tempfile.TemporaryDirectory() as full:
        install(Path(full), count)
        none, some = await first_request(Path(empty)), await first_request(Path(full))
    for label, row in (("no skills", none), (f"{count} skills", some)):
        print(f"{label:>10}: system prompt {row['system_prompt']:>6,} chars, tools {row['tools']:>6,} chars, "
              f"~{row['total'] // 4:,} tokens")
    extra = some["total"] - none["total"]
    print(f"{count} skills add ~{extra // 4:,} tokens to every request (~{extra // 4 // max(count, 1)} per skill, "
          f"the load_skill tool included); their bodies (~{count * 2000 // 4:,} tokens) are sent only on request")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=20)
    asyncio.run(main(parser.parse_args().skills))
