"""A main agent's start: its kernel boots while its model is built (the provider's SDK is imported then, seconds
of CPU), and a model that cannot be built stops that kernel again."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from freeact_sub import Agent, AgentConfig, ConfigError
from tests.processes import kernel_processes
from tests.scripting import Script


def _build_once_a_kernel_runs(model: Any, seen: list[int]) -> Any:
    """An `AgentConfig.resolve_model` that waits (as an SDK's import would take its time) until a kernel runs."""

    def resolve(self: AgentConfig) -> Any:
        deadline = time.monotonic() + 5
        while not (kernels := kernel_processes()) and time.monotonic() < deadline:
            time.sleep(0.02)
        seen.extend(kernels)
        if isinstance(model, Exception):
            raise model
        return model

    return resolve


async def test_the_main_agents_kernel_boots_while_its_model_is_built(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = Script()
    seen: list[int] = []
    monkeypatch.setattr(AgentConfig, "resolve_model", _build_once_a_kernel_runs(script.model, seen))
    async with Agent(
        AgentConfig(
            model="stands-for-a-provider", base_url="http://127.0.0.1:9/v1", working_dir=workdir, save_sessions=False
        )
    ) as agent:
        assert seen, "the kernel was not started before the model was built"
        assert agent.kernel is not None and agent.kernel.pid in seen
        assert agent.model is script.model


async def test_a_model_that_cannot_be_built_stops_the_kernel_that_booted_meanwhile(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []
    monkeypatch.setattr(AgentConfig, "resolve_model", _build_once_a_kernel_runs(ConfigError("no such model"), seen))
    agent = Agent(AgentConfig(model="stands-for-a-provider", base_url="http://127.0.0.1:9/v1", working_dir=workdir))
    with pytest.raises(ConfigError, match="no such model"):
        await agent.start()
    assert seen, "the kernel was not started before the model was built"
    assert kernel_processes() == [] and not agent.started
    assert not (workdir / ".freeact-sub" / "sessions").exists() or not any(
        (workdir / ".freeact-sub" / "sessions").iterdir()
    ), "no session was made for a start that failed"
