"""A cell's images go back to a model that accepts images, as image content of the tool result.

Within per-cell limits (`max_images_to_model`, `max_image_bytes`); the saved paths stay in the
text; a text-only model (by its pydantic-ai profile) gets the paths alone. Checked with a
scripted `FunctionModel` and, end to end, with the scripted OpenAI chat-completions server:
the request body carries the picture.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from pydantic_ai.messages import BinaryContent, ModelRequest, ToolReturnPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.profiles import ModelProfile

from freeact_sub import Agent, AgentConfig, CodeExecutionOutput, Response
from freeact_sub.demo import DEMO_MODEL, demo_config, start_demo_server
from tests.scripting import Call, Script, drive, of, single_agent_config

# a 1x1 red PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)


def show_images(count: int, *, padding: int = 0) -> str:
    """A cell that displays `count` PNGs (each made `padding` bytes bigger by a trailing chunk-free tail)."""
    data = base64.b64encode(PNG + b"\0" * padding).decode()
    return (
        "import base64\nfrom IPython.display import Image, display\n"
        f"for _ in range({count}):\n    display(Image(data=base64.b64decode({data!r})))"
    )


def returned(script: Script, request: int, call_id: str) -> ToolReturnPart:
    message = script.requests[request][-1]
    assert isinstance(message, ModelRequest)
    return next(p for p in message.parts if isinstance(p, ToolReturnPart) and p.tool_call_id == call_id)


async def run_cell(script: Script, workdir: Path, code: str, **settings: object) -> list:
    script.add([Call("execute_ipython_cell", {"code": code}, id="cell")], ["seen"])
    async with Agent(single_agent_config(script, workdir, **settings)) as agent:
        return await drive(agent.stream("draw"))


async def test_a_model_that_accepts_images_gets_the_picture_and_the_path(workdir: Path) -> None:
    script = Script()
    events = await run_cell(script, workdir, show_images(1))
    (output,) = of(CodeExecutionOutput, events)
    part = returned(script, 1, "cell")
    assert isinstance(part.content, list)
    text, image = part.content
    assert isinstance(image, BinaryContent) and image.data == PNG and image.media_type == "image/png"
    assert str(output.images[0]) in text  # the saved path is still named
    assert part.files == [image]


async def test_a_text_only_model_gets_the_path_alone(workdir: Path) -> None:
    script = Script()
    script.model = FunctionModel(
        stream_function=script._stream, model_name="text-only", profile=ModelProfile(supports_image_input=False)
    )
    events = await run_cell(script, workdir, show_images(1))
    (output,) = of(CodeExecutionOutput, events)
    part = returned(script, 1, "cell")
    assert isinstance(part.content, str) and str(output.images[0]) in part.content
    assert part.files == []


async def test_images_per_cell_are_capped_in_number(workdir: Path) -> None:
    script = Script()
    events = await run_cell(script, workdir, show_images(3), max_images_to_model=2)
    (output,) = of(CodeExecutionOutput, events)
    part = returned(script, 1, "cell")
    assert len(part.files) == 2 and len(output.images) == 3
    text = part.content[0]
    assert all(str(path) in text for path in output.images)  # every path, sent or not
    assert f"not shown to you (at most 2 per cell): {output.images[2]}" in text


async def test_images_over_the_size_limit_are_not_sent(workdir: Path) -> None:
    script = Script()
    events = await run_cell(script, workdir, show_images(1, padding=5000), max_image_bytes=1000)
    (output,) = of(CodeExecutionOutput, events)
    part = returned(script, 1, "cell")
    assert isinstance(part.content, str) and part.files == []
    assert "over 1,000" in part.content and str(output.images[0]) in part.content


async def test_no_images_to_the_model_when_turned_off(workdir: Path) -> None:
    script = Script()
    await run_cell(script, workdir, show_images(1), max_images_to_model=0)
    assert returned(script, 1, "cell").files == []


@pytest.mark.parametrize("sees_images", [True, False])
async def test_the_picture_reaches_the_openai_protocol_request(workdir: Path, sees_images: bool) -> None:
    with start_demo_server(chunk_delay=0) as server:
        if sees_images:
            config = demo_config(server, working_dir=workdir, auto_approve=True, mcp_servers={}, kernel_pool_size=0,
                                 agents={"reviewer": {"description": "unused: no demo server here"}})
        else:
            from pydantic_ai.models.openai import OpenAIChatModel
            from pydantic_ai.providers.openai import OpenAIProvider

            provider = OpenAIProvider(base_url=server.base_url, api_key="not-needed")
            model = OpenAIChatModel(DEMO_MODEL, provider=provider, profile=ModelProfile(supports_image_input=False))
            # (the demo model plays the main agent for an agent that has the `task` tool)
            config = AgentConfig(model=model, working_dir=workdir, auto_approve=True, kernel_pool_size=0)
        async with Agent(config) as agent:
            events = await drive(agent.stream("draw a picture"))
        (output,) = of(CodeExecutionOutput, events)
        saved = output.images[0].read_bytes()
        body = json.dumps(server.requests[-1])
    answer = [e.content for e in of(Response, events) if e.final][-1]
    data_url = "data:image/png;base64," + base64.b64encode(saved).decode()
    assert (data_url in body) is sees_images
    assert str(output.images[0]) in body  # the path, either way
    assert ("I can see the image" in answer) is sees_images
