"""The static transcript of a run keeps its styling where JupyterLab sanitizes HTML (an untrusted notebook).

JupyterLab's sanitizer drops `<style>` blocks and each inline declaration it does not accept; what
it keeps was found in JupyterLab 4 in Chromium (`tests/e2e/test_jupyterlab.py` checks the result
there): `color`, `background-color` and `border-<side>-color` with a `color-mix()` that holds a
theme variable, a `border` shorthand without a colour, but no bare `var()`, no `background` or
`border-color` with one.
"""

from __future__ import annotations

import re

from freeact_sub import ApprovalPolicy
from freeact_sub.notebook.agent_panel import AgentPanel
from freeact_sub.notebook.run_panel import RunPanel

_KEPT_WITH_A_VARIABLE = re.compile(r"color|background-color|border-(top|right|bottom|left)-color")


def declarations(html: str) -> list[tuple[str, str]]:
    found = []
    for style in re.findall(r'style="([^"]*)"', html):
        for part in style.split(";"):
            prop, _, value = part.partition(":")
            if prop.strip():
                found.append((prop.strip(), value.strip()))
    return found


def test_the_static_transcript_carries_its_theme_styling_in_a_form_the_sanitizer_keeps() -> None:
    panel = RunPanel("agent-1", "add it up", policy=ApprovalPolicy(approve_everything=True), on_stop=lambda: None,
                     auto_approve_note="Auto-approve is on")  # the banner shows while every action is approved
    panel.end("done")
    html = panel.static_html()
    body = html.split("</style>", 1)[1]  # what an untrusted notebook keeps: no <style> block
    found = declarations(body)
    assert found, "the static copy has no inline styles"
    for prop, value in found:
        if "var(" in value:
            assert _KEPT_WITH_A_VARIABLE.fullmatch(prop), (prop, value)
            assert value.startswith("color-mix("), (prop, value)
    banner = re.search(r'<div class="freeact-banner[^"]*" style="([^"]*)"', body)
    assert banner and "--jp-warn-color1" in banner.group(1) and "--jp-ui-font-color1" in banner.group(1)
    main = re.search(r'<details class="[^"]*freeact-main[^"]*" open="" style="([^"]*)">', body)  # a section, open
    assert main and "border-left: 4px solid" in main.group(1)


def test_the_live_panel_has_no_text_of_its_own() -> None:
    """An untrusted notebook shows a widget's `text/plain` in its place; the static copy beside it is the run's text, so
    the widget's own must be empty (it showed a stray `<freeact-sub run of agent-1>` above the transcript)."""
    panel = RunPanel("agent-1", "add it up", policy=ApprovalPolicy(), on_stop=lambda: None)
    bundle = panel._repr_mimebundle_()
    assert bundle["text/plain"] == ""
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == panel.model_id


def test_a_subagent_panel_folds_live_and_in_the_static_copy() -> None:
    """A subagent's panel (header, body and its message box) has a fold control, and its static copy is a `<details>`
    that is open or shut as the panel was; before, only panels of two parts became one, so a subagent never folded."""
    run = RunPanel("agent-1", "delegate", policy=ApprovalPolicy(), on_stop=lambda: None)
    child = AgentPanel("agent-2", policy=ApprovalPolicy(), subagent=True, on_stop=lambda _: None,
                       on_send=lambda _agent, _text: None)
    run.main.attach_subagent("call-1", child)
    assert len(child.children) == 3 and not child.folded

    def section() -> str:
        found = re.search(r'<details class="[^"]*freeact-subagent[^"]*"([^>]*)>', run.static_html())
        assert found, "the subagent's panel is no foldable section"
        return found.group(1)

    assert "open" in section()
    child.fold_button.click()
    assert child.folded and child.fold_button.icon == "chevron-right"
    assert all(part.layout.display == "none" for part in child.children[1:])  # its header alone stays
    assert "open" not in section()
    child.fold_button.click()
    assert not child.folded and child.message_box is not None and child.message_box.layout.display is None
    assert "open" in section()


def test_the_run_says_which_instructions_and_skills_were_read_and_nothing_when_none() -> None:
    panel = RunPanel("agent-1", "add it up", policy=ApprovalPolicy(), on_stop=lambda: None)
    before = len(panel.children)
    panel.show_files([], {}, [])
    assert len(panel.children) == before  # a missing file is silence
    panel.show_files(["/w/AGENTS.md"], {"pdf-forms": "Fill <PDF> forms."}, ["/w/.agents/skills/x: a link, not read"])
    (line,) = [child for child in panel.children if "freeact-files" in child._dom_classes]
    assert "<b>Instructions:</b> /w/AGENTS.md · <b>skills:</b> 1" in line.value
    assert "<b>pdf-forms</b> Fill &lt;PDF&gt; forms." in line.value and "a link, not read" in line.value
    assert panel.children.index(line) == panel.children.index(panel.main) - 1  # above the main agent's panel
