"""An agent's text in its notebook panel: the model's answer streamed (preformatted) and then as Markdown, and
the main agent's thinking; a failed attempt's partial text is thrown away."""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as widgets

from . import _html

__all__ = ["StreamedText"]


class StreamedText:
    """The text and thinking an agent's panel shows, each added to the panel (`append`) when it begins."""

    def __init__(self, append: Callable[[widgets.Widget], None]) -> None:
        self._append = append
        self._text: widgets.HTML | None = None
        self._text_buffer = ""
        self._thoughts: widgets.HTML | None = None
        self._thoughts_buffer = ""

    def drop_partial(self) -> None:
        """A failed attempt's streamed text and thinking are thrown away: the retry's take their place."""
        if self._text is not None:
            self._text_buffer = ""
            self._text.value = ""
        if self._thoughts is not None:
            self._thoughts_buffer = ""
            self._thoughts.value = ""

    def stream_text(self, content: str) -> None:
        if self._text is None:
            self._text = widgets.HTML()
            self._text.add_class("freeact-text")
            self._text_buffer = ""
            self._append(self._text)
        self._text_buffer += content
        self._text.value = _html.preformatted(self._text_buffer, "freeact-streaming")

    def complete_text(self, content: str) -> None:
        if not content:
            self._text = None
            return
        if self._text is None:
            self._text = widgets.HTML()
            self._text.add_class("freeact-text")
            self._append(self._text)
        self._text.value = _html.markdown(content)
        self._text = None

    def stream_thoughts(self, content: str) -> None:
        if self._thoughts is None:
            self._thoughts = widgets.HTML()
            self._thoughts_buffer = ""
            self._append(self._thoughts)
        self._thoughts_buffer += content
        self._thoughts.value = f'<div class="freeact-thoughts">Thinking: {_html.escape(self._thoughts_buffer)}</div>'

    def complete_thoughts(self, content: str) -> None:
        if self._thoughts is None:
            self._thoughts = widgets.HTML()
            self._append(self._thoughts)
        self._thoughts.value = f'<div class="freeact-thoughts">Thinking: {_html.escape(content)}</div>'
        self._thoughts = None
