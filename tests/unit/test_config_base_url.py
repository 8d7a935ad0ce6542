"""`base_url` points the provider the model prefix names at a URL; the request really goes there."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from pydantic_ai.direct import model_request
from pydantic_ai.messages import ModelRequest

from freeact_sub import AgentConfig, ConfigError


class _Recorder(BaseHTTPRequestHandler):
    """Records each request (path, headers, JSON body) and answers 400, so the client stops at once."""

    seen: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(body or b"{}")})
        payload = b'{"error": {"message": "recorded", "type": "invalid_request_error"}}'
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    _Recorder.seen = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", _Recorder.seen
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


async def _ask(config: AgentConfig) -> None:
    with pytest.raises(Exception):  # noqa: B017 - the recorder refuses every request
        await model_request(config.resolve_model(), [ModelRequest.user_text_prompt("hi")])


@pytest.mark.parametrize(
    ("model", "url_suffix", "path_part"),
    [
        ("anthropic:claude-test-1", "", "/v1/messages"),
        ("google:gemini-test-1", "", "models/gemini-test-1:generateContent"),
        ("google-gla:gemini-test-1", "", "models/gemini-test-1:generateContent"),
        ("openai:gpt-test-1", "/v1", "/v1/chat/completions"),
        ("local-model", "/v1", "/v1/chat/completions"),
        ("openai:qwen2.5:7b", "/v1", "/v1/chat/completions"),
    ],
)
async def test_the_prefix_names_the_provider_that_is_pointed_at_base_url(
    server, monkeypatch: pytest.MonkeyPatch, model: str, url_suffix: str, path_part: str
) -> None:
    url, seen = server
    monkeypatch.setenv("MY_KEY", "secret-from-my-key")
    await _ask(AgentConfig(model=model, base_url=url + url_suffix, api_key_env="MY_KEY"))
    assert seen, "no request reached the base_url"
    request = seen[0]
    assert path_part in request["path"]
    assert any("secret-from-my-key" in value for value in request["headers"].values())  # the key of api_key_env
    name = model.split(":", 1)[1] if ":" in model else model
    if "generateContent" not in path_part:  # Gemini names the model in the path, the others in the body
        assert request["body"]["model"] == name


async def test_without_api_key_env_no_host_key_goes_to_the_url(server, monkeypatch: pytest.MonkeyPatch) -> None:
    url, seen = server
    monkeypatch.setenv("ANTHROPIC_API_KEY", "the-hosts-real-key")
    await _ask(AgentConfig(model="anthropic:claude-test-1", base_url=url))
    assert seen and not any("the-hosts-real-key" in value for value in seen[0]["headers"].values())


@pytest.mark.parametrize("model", ["groq:llama-3", "no-such-provider:model", "qwen2.5:7b"])
def test_an_unsupported_prefix_with_base_url_is_a_config_error(model: str) -> None:
    config = AgentConfig(model=model, base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match="base_url") as info:
        config.resolve_model()
    assert model in str(info.value) and "openai:" in str(info.value)


def test_google_gla_prefix_without_base_url_still_works(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic_ai.models.google import GoogleModel

    monkeypatch.setenv("GOOGLE_API_KEY", "x")
    model = AgentConfig(model="google-gla:gemini-2.5-flash").resolve_model()
    assert isinstance(model, GoogleModel) and model.model_name == "gemini-2.5-flash"
