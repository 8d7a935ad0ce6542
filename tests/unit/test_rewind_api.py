"""`Agent.rewind` and `Agent.checkpoints` where there is nothing to go back to: a clear error naming why."""

from __future__ import annotations

from pathlib import Path

import pytest

from freeact_sub import Agent, AgentConfig


async def test_rewind_without_checkpoints_says_they_are_off_and_lists_none(tmp_path: Path) -> None:
    agent = Agent(AgentConfig(model="test", working_dir=tmp_path, checkpoints=False))
    assert agent.checkpoints() == []
    with pytest.raises(RuntimeError, match=r"no checkpoints to rewind to: checkpoints are off \(checkpoints = false\)"):
        await agent.rewind(1)
