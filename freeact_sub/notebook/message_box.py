"""A subagent's message box in its notebook panel: the person's message reaches it at its next step."""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as widgets

from . import _html

__all__ = ["message_box", "message_widgets"]


def message_widgets(agent_id: str) -> tuple[widgets.Text, widgets.Button, widgets.HTML]:
    """The message's text field, its Send button and the note under them (why a message was not sent)."""
    text = widgets.Text(placeholder=f"A message to {agent_id} while it works", layout=widgets.Layout(width="60%"))
    button = widgets.Button(description="Send", icon="paper-plane", tooltip=f"Send to {agent_id}",
                            layout=widgets.Layout(width="auto"))
    return text, button, widgets.HTML()


def message_box(
    agent_id: str, on_send: Callable[[str, str], str | None], text: widgets.Text, button: widgets.Button,
    note: widgets.HTML,
) -> widgets.HBox:
    """The box that sends `text` to `agent_id` through `on_send` (which returns why it refused, or None)."""
    text.add_class("freeact-message-text")
    button.add_class("freeact-send")

    def send(_: object) -> None:
        message = text.value.strip()
        if not message:
            return
        refused = on_send(agent_id, message)
        if refused is None:
            text.value = ""
        note.value = "" if refused is None else f'<span class="freeact-error">Not sent: {_html.escape(refused)}</span>'

    button.on_click(send)
    box = widgets.HBox([text, button, note])
    box.add_class("freeact-message-box")
    return box
