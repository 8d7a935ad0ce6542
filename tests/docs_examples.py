"""Every Python example of the README and the documentation pages, run in one process against the demo model.

`python tests/docs_examples.py OUT.json` runs them all and writes what each printed (and its traceback,
if it raised) to OUT.json; `tests/integration/test_docs_examples.py` runs it once and checks the results.
One process and one demo server for all of them: a Python start with freeact-sub, pydantic-ai and the
provider SDKs costs seconds, and there are some twenty examples.

What an example is, by its fence:

- a **program** (it ends with `asyncio.run(main())`) runs as a newcomer would run it, with one change:
  its `AgentConfig(model="…")` becomes the scripted demo server (a real OpenAI- and Anthropic-protocol
  HTTP server on 127.0.0.1), so it takes the code path a real provider does. `input()` answers `y`
  (or what the test asks for) and echoes its prompt, as a terminal would show it;
- a **fragment** (any other ```python block) runs with the names earlier blocks of its page defined,
  plus `agent` (a started agent on the demo model that approves everything), its `config` and
  `session_id` (a saved session of that config). Top-level `await` works, as in a notebook cell;
- a block titled `*_config.py` is a Jupyter config file: it runs with `c`, a traitlets `Config`;
- a block titled `a cell the model writes` runs in an agent's kernel, not here: the test checks that
  the program on its page ran that very code;
- any other titled block (```json title="mcp.json"```) is a file that its page's fragments read: it is
  written, under its title, to the folder the fragments run in.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import json
import os
import re
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r'^```(\w+)(?: title="([^"]*)")?\n(.*?)^```', flags=re.M | re.S)
MODEL_LINE = re.compile(r"AgentConfig\(model=\"[^\"]+\"(, )?")
KERNEL_CELL = "a cell the model writes"


@dataclass
class Example:
    page: str
    number: int  # the n-th Python block of its page, from 0
    title: str
    code: str
    runs: list[tuple[str, list[str]]] = field(default_factory=list)  # (key, answers to input())

    @property
    def key(self) -> str:
        return f"{self.page}#{self.number}"

    @property
    def kind(self) -> str:
        if self.title == KERNEL_CELL:
            return "kernel cell"
        if self.title.endswith("_config.py"):
            return "config file"
        return "program" if "asyncio.run(main())" in self.code else "fragment"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def examples() -> list[Example]:
    """Every Python block of every page; an identical block seen earlier (the README's program is also the
    quick start's) runs once, under its first key."""
    found: list[Example] = []
    seen: set[str] = set()
    for path in pages():
        page = str(path.relative_to(ROOT))
        python = [m for m in FENCE.finditer(path.read_text(encoding="utf-8")) if m.group(1) == "python"]
        for number, match in enumerate(python):
            if match.group(3) in seen:
                continue
            seen.add(match.group(3))
            found.append(Example(page, number, match.group(2) or "", match.group(3)))
    return found


def files_of(page: str) -> dict[str, str]:
    """The titled blocks of a page that are files (not Python), by their title."""
    text = (ROOT / page).read_text(encoding="utf-8")
    return {m.group(2): m.group(3) for m in FENCE.finditer(text) if m.group(2) and m.group(1) != "python"}


def on_demo_model(program: str, workdir: Path) -> str:
    """The program with its model swapped for the demo server's. No pools either: what they would start in
    the background (two kernels, an MCP server) only competes for the CPU with what the example runs."""
    demo = f"demo_config(_server, working_dir={str(workdir)!r}, kernel_pool_size=0, mcp_pool_size=0"
    replaced, count = MODEL_LINE.subn(lambda m: demo + (", " if m.group(1) else ""), program)
    if count != 1:
        raise ValueError(f"a program should build exactly one AgentConfig(model=...), this one builds {count}")
    return replaced


class Answers:
    """`input()` for the examples: echoes the prompt as a terminal does and answers from a list, then `y`."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)

    def __call__(self, prompt: str = "") -> str:
        answer = self.answers.pop(0) if self.answers else "y"
        print(f"{prompt}{answer}")
        return answer


@contextlib.contextmanager
def captured(results: dict[str, Any], key: str) -> Iterator[None]:
    out = io.StringIO()
    started = time.perf_counter()
    error = None
    with contextlib.redirect_stdout(out):
        try:
            yield
        except BaseException:  # the traceback is the test's message
            error = traceback.format_exc()
    results[key] = {"stdout": out.getvalue(), "error": error, "seconds": round(time.perf_counter() - started, 2)}


def run_programs(todo: list[Example], spaces: dict[str, dict[str, Any]], server: Any, workdir: Path,
                 results: dict[str, Any]) -> None:
    """Each program in the main thread, each with its own `asyncio.run`, as a person's script runs."""
    from freeact_sub.demo import demo_config

    for example in todo:
        for key, answers in example.runs or [(example.key, [])]:
            folder = workdir / re.sub(r"\W+", "-", key)
            folder.mkdir(parents=True, exist_ok=True)
            space = spaces.setdefault(example.page, {})
            space.update(_server=server, demo_config=demo_config, input=Answers(answers), __name__="__main__")
            with captured(results, key):
                code = compile(on_demo_model(example.code, folder), key, "exec")
                exec(code, space)


async def run_fragments(todo: list[Example], spaces: dict[str, dict[str, Any]], server: Any, workdir: Path,
                        results: dict[str, Any]) -> None:
    """The fragments, page by page in one event loop, beside one started agent they share."""
    from freeact_sub import Agent, AgentConfig
    from freeact_sub.demo import DEMO_MODEL, demo_config

    folder = workdir / "fragments"
    folder.mkdir(parents=True, exist_ok=True)
    os.chdir(folder)  # where `mcp.json` is read and `timeline.svg` written
    # no pools: nothing boots in the background that these short turns would not use
    config = demo_config(server, working_dir=folder, auto_approve=True, kernel_pool_size=0, mcp_pool_size=0)
    # a saved session for the pages that resume one, from an agent that starts in milliseconds (no kernel, no MCP)
    plain = AgentConfig(model=DEMO_MODEL, base_url=server.base_url_for("openai"), working_dir=folder,
                        disallowed_tools=["execute_ipython_cell"], auto_approve=True)
    async with Agent(plain) as earlier:
        async for _ in earlier.stream("What is the sum of 1 to 100? Use one cell."):
            pass
        session_id = earlier.session_id
    os.environ["FREEACT_SUB_AUTO_APPROVE"] = "1"  # an `AgentView` asks nobody here
    async with Agent(config) as agent:
        async for _ in agent.stream("What is the sum of 1 to 100? Use one cell."):  # usage to read, a kernel up
            pass
        for page in dict.fromkeys(example.page for example in todo):
            for name, text in files_of(page).items():
                (folder / name).write_text(text, encoding="utf-8")
            space = spaces.setdefault(page, {})
            space.update(agent=agent, config=config, session_id=session_id, input=Answers([]))
            for example in (e for e in todo if e.page == page):
                with captured(results, example.key):
                    if example.kind == "config file":
                        from traitlets.config import Config

                        space["c"] = Config()
                    code = compile(example.code, example.key, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
                    awaited = eval(code, space)
                    if awaited is not None:
                        await awaited
            await _tidy(space, keep=agent)
    os.environ.pop("FREEACT_SUB_AUTO_APPROVE", None)


async def _tidy(space: dict[str, Any], keep: Any) -> None:
    """Stop what a page's fragments left running: the tasks they keep (a watcher), agents but the shared one."""
    from freeact_sub import Agent

    for value in list(space.values()):
        if isinstance(value, asyncio.Task):
            value.cancel()
        elif isinstance(value, Agent) and value is not keep:
            await value.stop()
    space.pop("agent", None)


def main(out: Path, extra_runs: dict[str, list[tuple[str, list[str]]]]) -> None:
    from freeact_sub.demo import start_demo_server

    workdir = out.parent / "examples"
    todo = examples()
    for example in todo:
        if example.key in extra_runs:
            example.runs = [(example.key, []), *extra_runs[example.key]]
    results: dict[str, Any] = {}
    spaces: dict[str, dict[str, Any]] = {}
    with start_demo_server() as server:
        run_programs([e for e in todo if e.kind == "program"], spaces, server, workdir, results)
        fragments = [e for e in todo if e.kind in ("fragment", "config file")]
        asyncio.run(run_fragments(fragments, spaces, server, workdir, results))
    for example in todo:
        for key, _ in example.runs or [(example.key, [])]:
            results.setdefault(key, {"stdout": "", "error": None, "seconds": 0.0})
            results[key].update(kind=example.kind, title=example.title, code=example.code, page=example.page)
    out.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]), json.loads(sys.argv[2]) if len(sys.argv) > 2 else {})
