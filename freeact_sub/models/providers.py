"""The provider choice: the pydantic-ai `Model` a model string names, at its default URL or at a `base_url`.

Every problem is a `ConfigError` in a person's words: a missing API key names its variable, an
unknown prefix with `base_url` lists the prefixes that work there.
"""

from __future__ import annotations

import importlib
import os
import re
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from pydantic_ai.models import Model

__all__ = ["BASE_URL_PREFIXES", "api_key_from", "check_model", "model_at", "resolve_model"]

_PREFIX_ALIASES = {"google-gla": "google:"}
"""Older pydantic-ai prefixes, still accepted."""

BASE_URL_PREFIXES = ("openai", "openai-chat", "openai-responses", "anthropic", "google", "google-gla")
"""Model prefixes that work with `base_url`; a bare model name means an OpenAI-compatible server."""

_AT_BASE_URL: dict[str, tuple[str, str, str, str]] = {
    "": ("openai", "OpenAIChatModel", "openai", "OpenAIProvider"),
    "openai": ("openai", "OpenAIChatModel", "openai", "OpenAIProvider"),
    "openai-chat": ("openai", "OpenAIChatModel", "openai", "OpenAIProvider"),
    "openai-responses": ("openai", "OpenAIResponsesModel", "openai", "OpenAIProvider"),
    "anthropic": ("anthropic", "AnthropicModel", "anthropic", "AnthropicProvider"),
    "google": ("google", "GoogleModel", "google", "GoogleProvider"),
    "google-gla": ("google", "GoogleModel", "google", "GoogleProvider"),
}
"""By prefix: the pydantic-ai module and class of the model, and of its provider (imported only when used)."""


def resolve_model(model: Any, *, base_url: str | None = None, api_key_env: str | None = None) -> Model:
    """The pydantic-ai `Model` that `model` names (a `Model` is returned as it is), pointed at `base_url` if given.

    `api_key_env` names the environment variable holding the key for `base_url`. A `ConfigError`
    says what is missing or unknown.
    """
    from pydantic_ai.models import Model, infer_model

    if isinstance(model, Model):
        return model
    if not isinstance(model, str) or not model:
        raise ConfigError("model: expected a pydantic-ai model string such as 'openai:gpt-4.1'")
    if base_url:
        return model_at(model, base_url, api_key_from(api_key_env))
    try:
        prefix, _, rest = model.partition(":")
        return infer_model(f"{_PREFIX_ALIASES[prefix]}{rest}" if rest and prefix in _PREFIX_ALIASES else model)
    except Exception as exc:  # pydantic-ai raises UserError for unknown names and missing keys
        missing = re.search(r"Set the `(\w+)` environment variable", str(exc))
        if missing:  # say it in a person's words, not the library's (`OpenAIProvider(api_key=...)`)
            raise ConfigError(
                f"model {model!r} needs an API key: set the environment variable {missing.group(1)} "
                "(or put it in a .env file), or name another variable with api_key_env (--api-key-env NAME)"
            ) from None
        raise ConfigError(f"model {model!r}: {exc}") from None


def check_model(model: Any, *, base_url: str | None = None, api_key_env: str | None = None) -> None:
    """Raise the `ConfigError` `resolve_model` would, without building a model at `base_url`: that needs only its
    key's variable and a prefix that works there, and building one imports the provider's SDK (`anthropic` alone
    takes ~2 s), which a check at start need not pay for an agent type that may never run."""
    if isinstance(model, str) and model and base_url:
        api_key_from(api_key_env)
        _prefix_at_base_url(model)
        return
    resolve_model(model, base_url=base_url, api_key_env=api_key_env)


def api_key_from(api_key_env: str | None) -> str | None:
    """The key in the variable `api_key_env` names; None when no variable is named."""
    if not api_key_env:
        return None
    api_key = os.environ.get(api_key_env)
    if not api_key:
        raise ConfigError(f"api_key_env: the environment variable {api_key_env} is not set")
    return api_key


def model_at(model: str, base_url: str, api_key: str | None) -> Model:
    """The model `model` names, with its provider pointed at `base_url`.

    Without a key (`api_key_env`) the provider gets a placeholder: a server at a URL of your
    choosing (a local model, a proxy) must never receive a provider key from the host's
    environment by accident.
    """
    prefix, name = _prefix_at_base_url(model)
    model_module, model_class, provider_module, provider_class = _AT_BASE_URL[prefix]
    model_type = getattr(importlib.import_module(f"pydantic_ai.models.{model_module}"), model_class)
    provider_type = getattr(importlib.import_module(f"pydantic_ai.providers.{provider_module}"), provider_class)
    provider = provider_type(base_url=base_url, api_key=api_key or "not-needed")
    return model_type(name, provider=provider)


def _prefix_at_base_url(model: str) -> tuple[str, str]:
    """The prefix and the name of a model at a `base_url` ("" for a bare name); a `ConfigError` for a prefix that
    does not work with `base_url`."""
    prefix, _, name = model.partition(":")
    if not name:
        return "", model
    if prefix not in _AT_BASE_URL:
        known = ", ".join(f"'{p}:'" for p in BASE_URL_PREFIXES)
        raise ConfigError(
            f"model {model!r}: the prefix {prefix!r} does not work with base_url. Use one of {known}, or a "
            f"model name without a prefix for an OpenAI-compatible server (a name with a colon, such as "
            f"Ollama's 'qwen2.5:7b', goes as 'openai:qwen2.5:7b')"
        )
    return prefix, name
