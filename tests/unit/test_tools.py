"""The JSON tool definitions and the checks that turn bad arguments into messages for the model."""

from __future__ import annotations

import json

import pytest

from freeact_sub.tools import Toolbox, ToolSpec, builtin_tool, definitions_dir, parse_arguments


def _json_file(name: str) -> dict:
    return json.loads(definitions_dir().joinpath(f"{name}.json").read_text(encoding="utf-8"))


@pytest.fixture
def toolbox() -> Toolbox:
    return Toolbox([builtin_tool("execute_ipython_cell"), builtin_tool("reset_kernel"), builtin_tool("task")])


def test_execute_ipython_cell_takes_a_code_string() -> None:
    spec = builtin_tool("execute_ipython_cell")
    assert spec.name == "execute_ipython_cell"
    assert spec.parameters["properties"]["code"]["type"] == "string"
    assert spec.parameters["required"] == ["code"]
    assert spec.description


def test_reset_kernel_takes_no_arguments() -> None:
    spec = builtin_tool("reset_kernel")
    assert spec.name == "reset_kernel"
    assert spec.parameters["properties"] == {}
    assert not spec.parameters.get("required")


@pytest.mark.parametrize("name", ["execute_ipython_cell", "reset_kernel", "task"])
def test_the_json_file_is_the_single_source_of_truth(name: str) -> None:
    data = _json_file(name)
    definition = builtin_tool(name).definition()
    assert definition.name == data["name"] == name
    assert definition.description == data["description"]
    assert definition.parameters_json_schema == data["parameters"]


def test_unknown_tool_names_the_available_ones(toolbox: Toolbox) -> None:
    problem = toolbox.check("run_python", {"code": "1"})
    assert problem is not None
    assert "Unknown tool 'run_python'" in problem
    for name in ("execute_ipython_cell", "reset_kernel", "task"):
        assert name in problem


def test_missing_argument_is_named(toolbox: Toolbox) -> None:
    problem = toolbox.check("execute_ipython_cell", {})
    assert problem is not None
    assert "'code' is a required property" in problem


def test_mistyped_argument_is_named(toolbox: Toolbox) -> None:
    problem = toolbox.check("execute_ipython_cell", {"code": 42})
    assert problem is not None
    assert "code:" in problem
    assert "is not of type 'string'" in problem


def test_unexpected_argument_is_named(toolbox: Toolbox) -> None:
    problem = toolbox.check("reset_kernel", {"force": True})
    assert problem is not None
    assert "force" in problem


def test_valid_arguments_pass(toolbox: Toolbox) -> None:
    assert toolbox.check("execute_ipython_cell", {"code": "print(1)"}) is None
    assert toolbox.check("reset_kernel", {}) is None
    assert toolbox.check("task", {"prompt": "do it", "max_turns": 3}) is None


def test_schema_constraints_are_checked(toolbox: Toolbox) -> None:
    problem = toolbox.check("task", {"prompt": "do it", "max_turns": 0})
    assert problem is not None
    assert "max_turns" in problem


def test_defaults_are_filled_in(toolbox: Toolbox) -> None:
    assert toolbox.with_defaults("task", {"prompt": "p"}) == {
        "prompt": "p", "subagent_type": "general", "run_in_background": False, "fork": False
    }
    assert toolbox.with_defaults("task", {"prompt": "p", "max_turns": 2})["max_turns"] == 2


def test_an_mcp_tool_schema_is_checked_too() -> None:
    spec = ToolSpec(
        name="calc_add",
        description="Add",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    )
    box = Toolbox([spec])
    assert box.names == ["calc_add"]
    assert "calc_add" in box
    problem = box.check("calc_add", {"a": "one"})
    assert problem is not None
    assert "'b' is a required property" in problem
    assert "a: 'one' is not of type 'integer'" in problem


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, {}), ("", {}), ('{"code": "1"}', {"code": "1"}), ({"code": "1"}, {"code": "1"})],
)
def test_parse_arguments_accepts_json_objects(raw: object, expected: dict) -> None:
    assert parse_arguments(raw) == expected  # type: ignore[arg-type]


def test_parse_arguments_says_why_json_is_invalid() -> None:
    with pytest.raises(ValueError, match="not valid JSON") as info:
        parse_arguments('{"code": "print(1)"')
    assert "print(1)" in str(info.value)


def test_an_unterminated_string_is_described_without_a_doubled_word() -> None:
    with pytest.raises(ValueError, match="not valid JSON") as info:
        parse_arguments('{"code": "print(1)')
    message = str(info.value)
    assert "Unterminated string starting at position 9" in message
    assert "at at" not in message


def test_parse_arguments_wants_an_object() -> None:
    with pytest.raises(ValueError, match="must be a JSON object, got list"):
        parse_arguments('["print(1)"]')
