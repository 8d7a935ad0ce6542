"""`TrustPanel`: whether to use the working folder's files with powers (agent types, `AGENTS.md`, skills), asked
before the agent starts."""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as widgets

from freeact_sub import ProjectPowers

from . import _html

__all__ = ["TrustPanel"]


class TrustPanel(widgets.VBox):
    """The files and fields that wait for trust, with **Trust this folder** and **Don't trust**.

    The panel only reports the click; `AgentView` remembers the trust (or runs without those
    files) and starts the agent. The buttons carry the CSS classes `freeact-trust-yes` and
    `freeact-trust-no`, the panel `freeact-trust`.
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
        super().__init__([question, buttons])
        self.add_class("freeact-banner")
        self.add_class("freeact-trust")

    def settle(self, text: str) -> None:
        """The question is answered: the buttons go, `text` says what it means."""
        self.trust_button.disabled = self.distrust_button.disabled = True
        self.children = (widgets.HTML(_html.escape(text)),)
