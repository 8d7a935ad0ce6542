"""What the documentation pages state about the API agrees with the code: the events table of "Your own program"
names every event the package exports, each with its real fields, and the configuration page's `.env` list is
the set a project's `.env` may set. A renamed field or a new event fails here, not in a reader's program."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import freeact_sub
from freeact_sub.launch.env_file import DOTENV_SETTINGS

DOCS = Path(__file__).resolve().parents[2] / "docs"


def exported_events() -> set[str]:
    return {
        name
        for name in freeact_sub.__all__
        if isinstance(value := getattr(freeact_sub, name), type)
        and issubclass(value, freeact_sub.AgentEvent)
        and value is not freeact_sub.AgentEvent
    }


def test_the_events_table_names_every_event_with_its_real_fields() -> None:
    page = (DOCS / "program.md").read_text(encoding="utf-8")
    rows: dict[str, list[str]] = {}
    for line in page.splitlines():  # a row may show two events: `ThoughtsChunk(content)` / `Thoughts(content)`
        if line.startswith("| `"):
            for name, fields in re.findall(r"`(\w+)\(([^)]*)\)`", line.split(" | ")[0]):
                rows[name] = [f.strip() for f in fields.split(",") if f.strip()]
    assert set(rows) == exported_events(), set(rows) ^ exported_events()
    for name, fields in rows.items():
        real = {field.name for field in dataclasses.fields(getattr(freeact_sub, name))}
        assert set(fields) <= real, f"{name}: the table names {sorted(set(fields) - real)}, not fields of it"


def test_the_configuration_page_lists_every_setting_a_projects_env_may_set() -> None:
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    paragraph = page[page.index("**`.env`.**") :].split("\n\n")[0]
    listed = set(re.findall(r"`([A-Z_]+)`", paragraph[: paragraph.index("Everything else")]))
    assert listed == DOTENV_SETTINGS, listed ^ DOTENV_SETTINGS
