"""`TrustPanel`: whether to use the working folder's files with powers (agent types, `AGENTS.md`, skills), asked
before the agent starts."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import ipywidgets as widgets

from freeact_sub import ProjectPowers

from . import _html

__all__ = ["TrustPanel"]


class TrustPanel(widgets.VBox):
    """The files and fields that wait for trust, with **Trust this folder** and **Don't trust**.

    Under the question, **Open:** links each file by its path relative to the kernel's working folder (the
    notebook's folder unless the code changed it); in JupyterLab a click opens the file in a tab beside the
    notebook, to read it before answering. The panel only reports the click; `AgentView` remembers the trust
    (or runs without those files) and starts the agent. The buttons carry the CSS classes `freeact-trust-yes`
    and `freeact-trust-no`, the panel `freeact-trust`, the links' box `freeact-trust-files`.
    """

    def __init__(self, project: ProjectPowers, *, on_decision: Callable[[bool], None]) -> None:
        self.project = project
        question = widgets.HTML(_html.preformatted(project.question()))
        self.trust_button = widgets.Button(
            description="Trust this folder", button_style="warning", icon="check", layout=widgets.Layout(width="auto"),
            tooltip="Use these files (an agent type acts with your rights; instructions and skills go into the "
                    "model's prompt); remembered until these files change",
        )
        self.distrust_button = widgets.Button(
            description="Don't trust", icon="times", layout=widgets.Layout(width="auto"),
            tooltip="Run without these files (everything else works); asked again next time",
        )
        self.trust_button.add_class("freeact-trust-yes")
        self.distrust_button.add_class("freeact-trust-no")
        self.trust_button.on_click(lambda _: on_decision(True))
        self.distrust_button.on_click(lambda _: on_decision(False))
        buttons = widgets.HBox([self.trust_button, self.distrust_button])
        buttons.add_class("freeact-approval")
        self.files = open_links([file.path for file in project.powerful])
        """The links that open each file in JupyterLab."""
        super().__init__([question, self.files, buttons])
        self.add_class("freeact-banner")
        self.add_class("freeact-trust")

    def settle(self, text: str) -> None:
        """The question is answered: the buttons go, `text` says what it means."""
        self.trust_button.disabled = self.distrust_button.disabled = True
        self.children = (widgets.HTML(_html.escape(text)),)


def open_links(paths: list[Path]) -> widgets.Output:
    """**Open:** and a link per file, relative to the kernel's working folder.

    In an `Output` widget, not an `HTML` one: JupyterLab draws an output's HTML with its own renderer, which opens a
    relative link to a file in a JupyterLab tab; an `HTML` widget's link would leave JupyterLab for the raw file.
    """
    here = Path.cwd()
    links = []
    for path in paths:
        relative = Path(os.path.relpath(path, here)).as_posix()
        links.append(f'<a href="{_html.escape(quote(relative))}" title="{_html.escape(str(path))}">'
                     f"{_html.escape(relative)}</a>")
    box = widgets.Output()
    box.add_class("freeact-trust-files")
    if links:
        shown = "<b>Open:</b> " + " · ".join(links)
        box.outputs = ({"output_type": "display_data", "metadata": {},
                        "data": {"text/html": shown, "text/plain": "Open: " + ", ".join(map(str, paths))}},)
    return box
