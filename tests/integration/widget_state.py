"""Reading ipywidgets state the way a front end holds it: `model_id -> state` dicts.

Used by the notebook tests for the live state collected from a kernel's comm messages and for
the state nbclient saves in a notebook's metadata. The freeact-sub widgets mark themselves with
CSS classes (`freeact-panel-<agent_id>`, `freeact-approve`, `freeact-by-<agent_id>`, …).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

Models = Mapping[str, Mapping[str, Any]]
"""Widget states by model id (just the `state` part of each model)."""

_STATE = re.compile(r'data-state="([^"]+)"')


def classes(state: Mapping[str, Any]) -> set[str]:
    return set(state.get("_dom_classes") or ())


def children(state: Mapping[str, Any]) -> list[str]:
    return [ref.removeprefix("IPY_MODEL_") for ref in state.get("children") or ()]


def walk(models: Models, root: str) -> Iterator[str]:
    """Model ids of `root` and everything under it, in document order."""
    yield root
    for child in children(models.get(root, {})):
        yield from walk(models, child)


def with_classes(models: Models, *wanted: str, under: str | None = None) -> list[str]:
    """Ids of the models carrying every class in `wanted`, in document order under `under` if given."""
    ids = list(walk(models, under)) if under else list(models)
    return [i for i in ids if set(wanted) <= classes(models.get(i, {}))]


def runs(models: Models) -> list[str]:
    """The run panels (one per `view.run()` / `view.start()`)."""
    return with_classes(models, "freeact-run")


def agent_id(models: Models, panel: str) -> str:
    """The agent id of an agent panel."""
    (name,) = [c for c in classes(models[panel]) if c.startswith("freeact-panel-") and c != "freeact-panel-header"]
    return name.removeprefix("freeact-panel-")


def panel_state(models: Models, panel: str) -> str:
    """What the header of an agent panel says about the agent's state."""
    header = next(i for i in walk(models, panel) if "data-state=" in str(models[i].get("value", "")))
    match = _STATE.search(models[header]["value"])
    assert match, "an agent header without a state"
    return match.group(1)


def header(models: Models, panel: str) -> str:
    """The HTML of an agent panel's header (id, role, type, title, model, state)."""
    values = (str(models[i].get("value", "")) for i in walk(models, panel))
    return next(value for value in values if "data-state=" in value)


def subagent_panels(models: Models, run: str) -> list[str]:
    """Subagent panels of a run, in document order (the order of the `task` calls)."""
    return with_classes(models, "freeact-subagent", under=run)


def live_buttons(models: Models, kind: str, agent: str, under: str | None = None) -> list[str]:
    """Enabled buttons (`approve`, `reject`, `always`) of `agent`'s pending approval panels."""
    ids = with_classes(models, f"freeact-{kind}", f"freeact-by-{agent}", under=under)
    return [i for i in ids if not models[i].get("disabled")]


def text(models: Models, root: str) -> str:
    """All HTML shown under `root`, concatenated (for assertions on what a person reads)."""
    return "\n".join(str(models[i].get("value", "")) for i in walk(models, root) if "value" in models.get(i, {}))
