"""YAML front matter of a Markdown file (agent types, commands, skills), read with PyYAML's safe loader."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError

__all__ = ["front_matter"]


def front_matter(text: str, source: str) -> tuple[dict[str, Any], str]:
    """A Markdown file's YAML front matter (between `---` lines) and its stripped body; errors name `source`."""
    import yaml

    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise ConfigError(f"{source}: expected YAML front matter: a first line `---`, the fields, then `---`")
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            break
    else:
        raise ConfigError(f"{source}: the front matter is not closed by a `---` line")
    try:
        front = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: the front matter is not valid YAML: {exc}") from None
    if front is None:
        front = {}
    if not isinstance(front, dict):
        raise ConfigError(f"{source}: the front matter must be a mapping of fields, got {type(front).__name__}")
    return front, "".join(lines[end + 1 :]).strip()
