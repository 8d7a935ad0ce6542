"""`ModelOption`: a model the parent may pick for one `task` call, and finding one by the name a call gives.

A leaf: `config` (`subagent_models`) and `definitions` (a type's `models`) both read lists of
these, and the `task` runner looks the call's `model` up in the list that applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

__all__ = ["ModelOption", "find_option", "model_label", "option_list"]


class ModelOption(BaseModel):
    """One model of an allowlist. Written as its model string alone, or as a table with its own connection.

    Like an agent type's own `model`, a listed model brings its own connection: its `base_url`,
    `api_key_env` and `model_settings` (unset: the provider's defaults), never the parent's.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, frozen=True, populate_by_name=True)

    model: Any
    """A pydantic-ai model string (`anthropic:claude-haiku-4-5`, …) or `Model`."""
    base_url: str | None = Field(default=None, validation_alias=AliasChoices("base_url", "baseUrl"))
    """Points the provider the model's prefix names at another endpoint (a bare model name: OpenAI-compatible)."""
    api_key_env: str | None = Field(default=None, validation_alias=AliasChoices("api_key_env", "apiKeyEnv"))
    """The environment variable that holds the API key for this model."""
    model_settings: dict[str, Any] | None = Field(
        default=None, validation_alias=AliasChoices("model_settings", "modelSettings")
    )
    """pydantic-ai `ModelSettings` for this model."""

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        if isinstance(value, str) or (value is not None and not isinstance(value, dict | BaseModel)):
            return {"model": value}
        return value

    @model_validator(mode="after")
    def _named(self) -> ModelOption:
        if isinstance(self.model, str) and not self.model.strip():
            raise ValueError("model: expected a non-empty model string")
        if not isinstance(self.model, str) and not isinstance(getattr(self.model, "model_name", None), str):
            raise ValueError(f"model: expected a model string or a pydantic-ai Model, got {type(self.model).__name__}")
        return self

    @property
    def name(self) -> str:
        """How a `task` call names it: the model string as written (a `Model`: its `model_name`)."""
        return model_label(self.model)


def model_label(model: Any) -> str:
    """A model's name as a person and a model read it: the string as written, or a `Model`'s `model_name`."""
    return model if isinstance(model, str) else str(getattr(model, "model_name", type(model).__name__))


def option_list(value: Any) -> Any:
    """A list of options from a config value: `"a,b"` (an environment variable or a flag) is two names."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _tail(name: str) -> str:
    return name.partition(":")[2] or name


def find_option(options: Sequence[ModelOption], name: str) -> ModelOption | None:
    """The option `name` picks: its exact name, else the one that differs only by the provider prefix.

    `claude-haiku-4-5` picks `anthropic:claude-haiku-4-5`; `openai:llama3.2` (how a session names a
    model) picks `llama3.2`. Two candidates pick neither.
    """
    name = name.strip()
    for option in options:
        if option.name == name:
            return option
    matches = [option for option in options if name in (_tail(option.name), option.name) or _tail(name) == option.name]
    return matches[0] if len(matches) == 1 else None
