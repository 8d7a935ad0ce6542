"""Turning telemetry on: the setting, the flags, the standard OTLP variables; a project's `.env` cannot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from freeact_sub.launch import build_config, load_dotenv
from freeact_sub.telemetry import wanted
from freeact_sub.terminal.arguments import build_parser
from tests.scripting import no_freeact_sub_environment


@pytest.fixture(autouse=True)
def restored_environment() -> Iterator[None]:
    with no_freeact_sub_environment():
        yield


def test_on_when_asked_or_when_an_otlp_endpoint_is_set_and_off_when_the_sdk_is_disabled() -> None:
    assert not wanted(False, {})
    assert wanted(True, {})
    assert wanted(False, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert wanted(False, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"})
    assert not wanted(True, {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"})


def test_the_flags_turn_it_and_its_content_on(tmp_path: Path) -> None:
    parse = build_parser().parse_args
    config = build_config(parse([]), tmp_path, None)
    assert (config.telemetry, config.telemetry_content) == (False, False)
    config = build_config(parse(["--telemetry", "--telemetry-content"]), tmp_path, None)
    assert (config.telemetry, config.telemetry_content) == (True, True)


def test_a_project_dotenv_cannot_turn_telemetry_on(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("FREEACT_SUB_TELEMETRY=1\nFREEACT_SUB_TELEMETRY_CONTENT=1\n")
    said: list[str] = []
    load_dotenv(tmp_path, said.append)
    config = build_config(build_parser().parse_args([]), tmp_path, None)
    assert (config.telemetry, config.telemetry_content) == (False, False)
    assert len(said) == 1 and "FREEACT_SUB_TELEMETRY" in said[0]
