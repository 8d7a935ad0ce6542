"""A folder whose `AGENTS.md` waits for trust, asked about in the chat (issue 40, item 29), with the ACP SDK's client.

One agent process, two folders, each with an `AGENTS.md`, and a `HOME` of the test's own (where trust is kept).
The first prompt of each session is asked first, a question of its own naming the file and what it would do:
trusted in the first folder (remembered; the agent restarts on the same session, and the prompt runs), run
without it in the second (nothing remembered). Neither asks again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.schema import AllowedOutcome, RequestPermissionResponse

from freeact_sub import trusted_folders
from tests.cli_fork import module_command
from tests.e2e.terminal_driver import cli_env

pytestmark = pytest.mark.timeout(180)


class Client:
    """Answers the trust question as `trust_answer` says, and every other question `once`."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Any, list[str]]] = []
        self.trust_answer = "trust"

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        pass

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **kwargs: Any
    ) -> RequestPermissionResponse:
        self.asked.append((session_id, tool_call, [option.option_id for option in options]))
        picked = self.trust_answer if tool_call.tool_call_id == "trust-project" else "once"
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=picked))

    def on_connect(self, conn: Any) -> None:
        pass


async def test_the_chat_asks_to_trust_a_folders_agents_md_before_its_first_answer(tmp_path: Path) -> None:
    home, folders = tmp_path / "home", [tmp_path / "trusted", tmp_path / "without"]
    for folder in folders:
        folder.mkdir(parents=True)
        (folder / "AGENTS.md").write_text("Always answer in French.\n")
    client = Client()
    command = module_command("freeact_sub.cli", "acp", "--demo")
    async with spawn_agent_process(
        client,
        *command,
        cwd=tmp_path,
        env=cli_env(HOME=str(home)),
        transport_kwargs={"stderr": None, "shutdown_timeout": 30},
    ) as (conn, _):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        for folder, answer in zip(folders, ("trust", "without"), strict=True):
            client.trust_answer, client.asked = answer, []
            session = (await conn.new_session(cwd=str(folder), mcp_servers=[])).session_id
            for _ in range(2):
                done = await conn.prompt(session_id=session, prompt=[text_block("compute it in one cell")])
                assert done.stop_reason == "end_turn"
            asked = [(on, call.tool_call_id) for on, call, _ in client.asked]
            assert asked[0] == (session, "trust-project") and len(asked) == 3  # asked once, then a cell a prompt
            _, question, options = client.asked[0]
            assert question.title == "Trust this folder's instructions? (AGENTS.md)"
            assert "AGENTS.md: instructions in every agent's system prompt" in question.raw_input
            assert options == ["trust", "session", "without"]
    remembered = trusted_folders(home / ".config" / "freeact-sub" / "trusted-folders.json")
    assert str(folders[0].resolve()) in remembered and str(folders[1].resolve()) not in remembered
