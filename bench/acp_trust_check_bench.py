"""What the ACP agent's trust check adds to every `session/new` and `session/load`: CPU time, against the session's
configuration that is built anyway.

    python bench/acp_trust_check_bench.py [--runs 200]

Each ACP session now asks `Agent.untrusted_project()` before it starts, to know whether its first prompt must ask
to trust the folder (`freeact_sub/acp/trust.py`). That reads the folder's `AGENTS.md`, skills and agent type files
and hashes them. The baseline is `build_config` for the same folder, which every session runs already. Both are
timed in one process, alternated run by run, in three folders: empty, one with an `AGENTS.md`, and one with an
`AGENTS.md`, two skills and two agent types. It prints the median CPU microseconds of each and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

SKILL = "---\nname: {name}\ndescription: a skill\n---\nDo the thing.\n"
TYPE = "---\nname: {name}\ndescription: a type\nhooks:\n  PreToolUse: []\n---\nYou help.\n"


def _folders(root: Path) -> dict[str, Path]:
    empty, agents, full = root / "empty", root / "agents-md", root / "full"
    for folder in (empty, agents, full):
        folder.mkdir()
    for folder in (agents, full):
        (folder / "AGENTS.md").write_text("Answer briefly.\n" * 40)
    for index in range(2):
        skill = full / ".agents" / "skills" / f"skill{index}"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(SKILL.format(name=f"skill{index}"))
        types = full / ".freeact-sub" / "agents"
        types.mkdir(parents=True, exist_ok=True)
        (types / f"type{index}.md").write_text(TYPE.format(name=f"type{index}"))
    return {"empty": empty, "AGENTS.md": agents, "AGENTS.md + 2 skills + 2 types": full}


def _cpu_us(action: object) -> float:
    started = time.process_time()
    action()  # type: ignore[operator]
    return (time.process_time() - started) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    runs = parser.parse_args().runs
    from freeact_sub import Agent
    from freeact_sub.acp.main import build_parser
    from freeact_sub.launch import build_config

    args = build_parser().parse_args([])
    with tempfile.TemporaryDirectory() as tmp:
        for name, folder in _folders(Path(tmp)).items():
            config_us, check_us = [], []
            for _ in range(runs):
                config_us.append(_cpu_us(lambda folder=folder: build_config(args, folder, None)))
                agent = Agent(build_config(args, folder, None))  # made for every session anyway
                check_us.append(_cpu_us(agent.untrusted_project))
            config, check = statistics.median(config_us), statistics.median(check_us)
            print(f"{name:32}  build_config {config:6.0f} us  trust check {check:6.0f} us  ratio {check / config:.2f}")


if __name__ == "__main__":
    main()
