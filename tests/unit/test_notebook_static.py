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
    panel = RunPanel("agent-1", "add it up", policy=ApprovalPolicy(), on_stop=lambda: None,
                     auto_approve_note="Auto-approve is on")
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
