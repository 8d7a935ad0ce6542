"""The stylesheet of the widgets, sent once per run as a `<style>` inside an `HTML` widget.

Every colour is one of JupyterLab's theme variables, so light and dark themes (and any other
theme) both work: code is highlighted with the editor's own colours (`--jp-mirror-editor-*`),
badges and borders use the theme's brand / success / warn / error colours, text on a badge is
the theme's own text colour on a tint of the badge's colour (readable in both themes). The
fallbacks after each variable are the light theme's values, for a rendering outside JupyterLab
(the static transcript on GitHub or nbviewer).

The static transcript is also read in notebooks that are not trusted, where JupyterLab's
sanitizer drops `<style>` elements and every inline declaration it does not accept: a plain
`var(--jp-…)` and a `border` shorthand with a colour are dropped, while `color`,
`background-color` and `border-<side>-color` keep a `color-mix(…)` that holds the variable.
`inline_styles` puts the rules into `style` attributes in that form (`css-inline` does the
matching of selectors), so the transcript keeps its panels, badges and highlighting, in the
theme's colours, even there.
"""

from __future__ import annotations

import re
from functools import cache

__all__ = ["CODE_CLASS_PREFIX", "STYLESHEET", "inline_styles", "static_stylesheet"]

CODE_CLASS_PREFIX = "fa-"
"""Prefix of the Pygments token classes in highlighted code (`fa-k` for a keyword, …)."""

# Pygments token type (a prefix of the dotted name) -> JupyterLab editor colour and its light fallback.
# The longest matching prefix wins, so `Name.Builtin` beats `Name`.
_TOKEN_COLOURS: dict[str, tuple[str, str]] = {
    "Keyword": ("keyword", "#008000"),
    "Keyword.Constant": ("atom", "#88f"),
    "Operator": ("operator", "#7800c2"),
    "Operator.Word": ("keyword", "#008000"),
    "Punctuation": ("punctuation", "#05a"),
    "Name": ("variable", "#212121"),
    "Name.Builtin": ("builtin", "#008000"),
    "Name.Builtin.Pseudo": ("variable-2", "#00366d"),
    "Name.Function": ("def", "#00f"),
    "Name.Class": ("def", "#00f"),
    "Name.Decorator": ("meta", "#a2f"),
    "Name.Exception": ("builtin", "#008000"),
    "Name.Namespace": ("variable-2", "#00366d"),
    "Name.Tag": ("tag", "#170"),
    "Name.Attribute": ("attribute", "#00c"),
    "Literal.String": ("string", "#ba2121"),
    "Literal.String.Doc": ("comment", "#408080"),
    "Literal.String.Interpol": ("string-2", "#708"),
    "Literal.String.Escape": ("string-2", "#708"),
    "Literal.Number": ("number", "#080"),
    "Comment": ("comment", "#408080"),
    "Generic.Heading": ("header", "blue"),
    "Generic.Emph": ("quote", "#090"),
    "Error": ("error", "red"),
}


def _token_rules() -> str:
    from pygments.token import STANDARD_TYPES

    rules = []
    for token, short in sorted(STANDARD_TYPES.items(), key=lambda item: item[1]):
        if not short:
            continue
        name = str(token).removeprefix("Token.")
        matches = [prefix for prefix in _TOKEN_COLOURS if name == prefix or name.startswith(prefix + ".")]
        if not matches:
            continue
        variable, fallback = _TOKEN_COLOURS[max(matches, key=len)]
        italic = " font-style: italic;" if name.startswith("Comment") else ""
        rules.append(
            f".freeact-code .{CODE_CLASS_PREFIX}{short} "
            f"{{ color: var(--jp-mirror-editor-{variable}-color, {fallback});{italic} }}"
        )
    return "\n".join(rules)


_RULES = """
.freeact-run { width: 100%; }
.freeact-run.widget-box, .freeact-run.widget-box > .freeact-run-header { overflow: visible; }
.freeact-run-header { align-items: center; gap: 8px; position: sticky; top: 0; z-index: 10;
  background: var(--jp-layout-color1, #fff); border-bottom: 1px solid var(--jp-border-color2, #e0e0e0);
  padding: 2px 0; flex-wrap: nowrap; min-width: 0; }
/* one line at any width: buttons and badges keep their size and words, the prompt gives way (all of it on hover) */
.freeact-run-header > * { flex: none; }
.freeact-run-header > .freeact-prompt { flex: 1 1 0; min-width: 0; overflow: hidden; }
/* the run's tokens and cost give way after the prompt: cut with an ellipsis, never past the notebook's edge */
.freeact-run-header > .freeact-run-usage-line { flex: 0 1 auto; min-width: 0; overflow: hidden; }
.freeact-run-usage { display: block; overflow: hidden; text-overflow: ellipsis; }
.freeact-prompt-text { display: block; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.freeact-run-status, .freeact-pending-count, .freeact-run-usage { white-space: nowrap; }
/* a narrow notebook (700 px with the file browser open): the run's status is the main agent's badge too, and
   Approve all agents keeps its icon (its tooltip says it), so Stop and the pending count still fit on the line */
.freeact-run { container-type: inline-size; }
@container (max-width: 520px) {
  .freeact-run-header .freeact-run-status { display: none; }
  .freeact-run-header .freeact-approve-all { font-size: 0; display: inline-flex; align-items: center; }
  .freeact-run-header .freeact-approve-all i { font-size: var(--jp-widgets-font-size, 13px); }
}
/* JupyterLab's output area clips and scrolls by itself, which would make the header stick to it, not the notebook */
.jp-OutputArea:has(.freeact-run-header), .jp-OutputArea-child:has(.freeact-run-header),
.jp-OutputArea-output:has(.freeact-run-header) { overflow: visible; }
/* without its scrolling, a flex item's least width is its content's widest line: the run would push past the
   notebook's right edge in a narrow window; it keeps the width it is given instead */
.jp-OutputArea:has(.freeact-run-header), .jp-OutputArea-child:has(.freeact-run-header),
.jp-OutputArea-output:has(.freeact-run-header), .freeact-run, .freeact-run .widget-box { min-width: 0; }
.freeact-pending-count { padding: 0 6px; border-radius: 8px; font-size: 90%; font-weight: bold; border: 1px solid;
  border-color: var(--jp-warn-color1, #ff9800); color: var(--jp-ui-font-color1, rgba(0,0,0,.87));
  background-color: color-mix(in srgb, var(--jp-warn-color1, #ff9800) 22%, var(--jp-layout-color1, #fff)); }
.freeact-pending-count:empty { display: none; }
.freeact-banner { padding: 4px 8px; border-radius: 4px; margin: 2px 0; border-left: 4px solid;
  border-left-color: var(--jp-warn-color1, #ff9800); background-color: var(--jp-layout-color2, #eee);
  color: var(--jp-ui-font-color1, rgba(0,0,0,.87)); }
.freeact-panel { border: 1px solid var(--jp-border-color1, #bdbdbd); border-radius: 6px;
  padding: 6px 8px; margin: 4px 0; width: auto; color: var(--jp-ui-font-color1, rgba(0,0,0,.87)); }
.freeact-panel.freeact-subagent { border-left: 4px solid var(--jp-brand-color1, #2196f3); margin-left: 4px; }
.freeact-panel.freeact-main { border-left: 4px solid var(--jp-ui-font-color2, rgba(0,0,0,.54)); }
.freeact-panel-header { align-items: center; gap: 8px; flex-wrap: wrap; }
/* the fold control stays at the left of the agent's id: the header's text takes the rest of that line and wraps in it
   (as one long item it went to a line of its own, leaving the ▾ alone above it); at least 60% of the line, so in a
   narrow notebook the checkbox and Stop go to the next line rather than squeeze the text into a column */
.freeact-panel-header > .widget-html { flex: 1 1 60%; min-width: 0; }
/* an HTML widget's content does not shrink by itself (ipywidgets): a line of text in it (a subagent's result, the
   run's prompt) would be clipped at a narrow notebook's edge instead of wrapping, or cut without its ellipsis */
.freeact-run .widget-html > .widget-html-content { min-width: 0; flex-shrink: 1; }
/* ipywidgets gives HTML the height of a button row per line; text of several lines reads at the notebook's spacing */
.freeact-run .freeact-markdown, .freeact-run .freeact-thoughts { line-height: var(--jp-content-line-height, 1.6); }
.freeact-id { font-family: var(--jp-code-font-family, monospace); font-weight: bold; }
.freeact-role, .freeact-meta { color: var(--jp-ui-font-color2, rgba(0,0,0,.54)); }
.freeact-meta { font-size: 90%; }
.freeact-turns { white-space: nowrap; }  /* "turns used:" never wraps away from its value */
.freeact-model-note { font-size: 90%; color: var(--jp-warn-color0, #e65100); }
.freeact-sandbox { font-size: 90%; padding: 0 5px; border-radius: 8px;
  /* a narrow panel cuts the pill with an ellipsis (its tooltip says it all), not mid-letter at its edge */
  display: inline-block; max-width: 100%; box-sizing: border-box; overflow: hidden; text-overflow: ellipsis;
  vertical-align: bottom;
  border: 1px solid var(--jp-border-color1, #bdbdbd); color: var(--jp-ui-font-color2, rgba(0,0,0,.54)); }
.freeact-sandbox-off { border-color: var(--jp-warn-color0, #f57c00); color: var(--jp-ui-font-color1, rgba(0,0,0,.87));
  background-color: color-mix(in srgb, var(--jp-warn-color1, #ff9800) 22%, var(--jp-layout-color1, #fff)); }
.freeact-state, .freeact-decision, .freeact-sandbox, .freeact-type, .freeact-model { white-space: nowrap; }
.freeact-state { padding: 0 6px; border-radius: 8px; font-size: 90%; border: 1px solid;
  border-color: var(--jp-ui-font-color2, rgba(0,0,0,.54)); color: var(--jp-ui-font-color1, rgba(0,0,0,.87));
  background-color: var(--jp-layout-color1, #fff); }
.freeact-state-running { border-color: var(--jp-brand-color1, #2196f3);
  background-color: color-mix(in srgb, var(--jp-brand-color1, #2196f3) 22%, var(--jp-layout-color1, #fff)); }
.freeact-state-waiting { border-color: var(--jp-warn-color1, #ff9800);
  background-color: color-mix(in srgb, var(--jp-warn-color1, #ff9800) 22%, var(--jp-layout-color1, #fff)); }
.freeact-state-done { border-color: var(--jp-success-color1, #4caf50);
  background-color: color-mix(in srgb, var(--jp-success-color1, #4caf50) 22%, var(--jp-layout-color1, #fff)); }
.freeact-state-failed { border-color: var(--jp-error-color1, #f44336);
  background-color: color-mix(in srgb, var(--jp-error-color1, #f44336) 22%, var(--jp-layout-color1, #fff)); }
.freeact-call { border: 1px solid var(--jp-border-color2, #e0e0e0); border-radius: 4px;
  padding: 4px 6px; margin: 3px 0; }
.freeact-call.freeact-pending { border: 2px solid var(--jp-warn-color1, #ff9800); }
.freeact-call-title { font-family: var(--jp-code-font-family, monospace); font-size: 90%; }
/* a cell's title line: the title takes the room, Copy sits at the right end */
.freeact-call-head { align-items: center; gap: 6px; }
.freeact-call-head > :first-child { flex: 1 1 auto; min-width: 0; }
.freeact-call-head > .freeact-copy { flex: none; }
.freeact-copy-button { font: inherit; font-size: 85%; cursor: pointer; padding: 0 8px; border-radius: 3px;
  color: var(--jp-ui-font-color1, #000); background: var(--jp-layout-color2, #eee);
  border: 1px solid var(--jp-border-color1, #bdbdbd); }
.freeact-copy-button:hover { background: var(--jp-layout-color3, #ddd); }
.freeact-decision { padding: 0 5px; border-radius: 6px; font-size: 85%; border: 1px solid;
  border-color: var(--jp-border-color1, #bdbdbd); color: var(--jp-ui-font-color1, rgba(0,0,0,.87)); }
.freeact-decision-approved, .freeact-decision-auto { border-color: var(--jp-success-color1, #4caf50);
  background-color: color-mix(in srgb, var(--jp-success-color1, #4caf50) 18%, var(--jp-layout-color1, #fff)); }
.freeact-decision-rejected, .freeact-decision-cancelled { border-color: var(--jp-error-color1, #f44336);
  background-color: color-mix(in srgb, var(--jp-error-color1, #f44336) 18%, var(--jp-layout-color1, #fff)); }
.freeact-decision-interrupted, .freeact-decision-timed-out, .freeact-decision-waiting {
  border-color: var(--jp-warn-color1, #ff9800);
  background-color: color-mix(in srgb, var(--jp-warn-color1, #ff9800) 18%, var(--jp-layout-color1, #fff)); }
.freeact-reason, .freeact-rule { color: var(--jp-ui-font-color2, rgba(0,0,0,.54)); font-style: italic; }
.freeact-hook-error { color: var(--jp-warn-color0, #f57c00); font-size: 90%; margin: 2px 0; }
.freeact-compacted { color: var(--jp-info-color0, #0097a7); font-size: 90%; margin: 2px 0; }
pre.freeact-code, pre.freeact-pre, div.freeact-static pre.freeact-code, div.freeact-static pre.freeact-pre {
  margin: 2px 0; padding: 4px 6px; white-space: pre-wrap; word-break: break-word;
  background: var(--jp-cell-editor-background, #f5f5f5); color: var(--jp-content-font-color1, rgba(0,0,0,.87));
  border-radius: 3px; font-family: var(--jp-code-font-family, monospace); font-size: var(--jp-code-font-size, 13px); }
pre.freeact-output, div.freeact-static pre.freeact-output {
  background: var(--jp-layout-color2, #eee); max-height: 24em; overflow-y: auto; }
/* live, a long output scrolls in its widget's own element, which stays while each update replaces the <pre> inside
   (a scrolling <pre> went back to its top on every new line); reversed, the box follows the end while the person is
   there and keeps their place once they scrolled up */
.jupyter-widgets.freeact-output-box:has(pre.freeact-output) { max-height: 24em; overflow-y: auto;
  flex-direction: column-reverse; }
.jupyter-widgets.freeact-output-box > * { flex-shrink: 0; }
.jupyter-widgets.freeact-output-box pre.freeact-output { max-height: none; overflow-y: visible; }
/* the theme's error red leans a little to the text colour: 4.5:1 or more on the panels and output boxes of both themes
   (the plain red read at 4.4:1 in the dark theme) */
.freeact-error, pre.freeact-pre.freeact-error, div.freeact-static pre.freeact-error {
  color: color-mix(in srgb, var(--jp-error-color1, #f44336) 45%, var(--jp-ui-font-color1, rgba(0,0,0,.87))); }
.freeact-thoughts { color: var(--jp-ui-font-color2, rgba(0,0,0,.54)); font-style: italic; white-space: pre-wrap; }
.freeact-markdown p { margin: 2px 0; }
.freeact-approval { align-items: center; gap: 6px; flex-wrap: wrap; }
.freeact-always { align-items: center; gap: 6px; }
/* the static transcript: boxes laid out like the widgets they stand for (the `div.freeact-static pre.…`
   selectors above outweigh JupyterLab's `.jp-ThemedContainer .jp-RenderedHTMLCommon pre`) */
.freeact-hbox { display: flex; flex-direction: row; align-items: center; gap: 8px; flex-wrap: wrap; }
.freeact-vbox { display: flex; flex-direction: column; }
.freeact-static img { max-width: 480px; }
.freeact-summary { display: list-item; cursor: pointer; }
.freeact-summary > .freeact-hbox { display: inline-flex; vertical-align: middle; }
/* in a live session the widgets show the run; the static copy is for a notebook reopened without them */
.jp-OutputArea:has(.freeact-live:not(.jupyter-widgets-disconnected)) .freeact-static { display: none; }
/* reopened trusted, the widgets are rebuilt from their saved state with no kernel behind them (dead buttons, a
   broken-link icon on each): the static copy stands for the run instead */
.jp-OutputArea:has(.freeact-static) .jp-OutputArea-child:has(.freeact-live.jupyter-widgets-disconnected) {
  display: none; }
/* reopened without a kernel: a saved run shows its static copy, not "Loading widget..." and then "Error displaying
   widget: model not found" (the widget renderer writes them as bare text; unlike JupyterLab's own renderers it has no
   data-mime-type). No :has() inside this rule's :has(): a nested one makes the whole rule invalid */
.jp-OutputArea:has(.freeact-static) > .jp-OutputArea-child > .jp-OutputArea-output:not([data-mime-type]):not(:has(*)) {
  display: none; }
"""


@cache
def static_stylesheet() -> str:
    """The rules as one `<style>` element (token colours included)."""
    return f"<style>{_RULES}{_token_rules()}\n</style>"


STYLESHEET = static_stylesheet()


_VAR = re.compile(r"var\(--jp-[\w-]+(?:,\s*((?:[^()]|\([^()]*\))*))?\)")
_STYLE = re.compile(r'style="([^"]*)"')
_SIDES = ("top", "right", "bottom", "left")
_BORDER = re.compile(r"^border(?:-(top|right|bottom|left))?$")


def _keeps_colour(value: str) -> str:
    """A colour value the sanitizer keeps: each theme variable inside a `color-mix()`."""
    if value.startswith("color-mix("):
        return value
    return _VAR.sub(lambda m: f"color-mix(in srgb, {m.group(0)} 100%, transparent)", value)


def _declarations(prop: str, value: str) -> list[tuple[str, str]]:
    """One declaration as declarations that survive JupyterLab's sanitizer, with the same effect."""
    if "var(" not in value:
        return [(prop, value)]
    if prop == "background":
        prop = "background-color"
    if prop == "color" or prop == "background-color" or re.fullmatch(r"border-(top|right|bottom|left)-color", prop):
        return [(prop, _keeps_colour(value))]
    if prop == "border-color":
        return [(f"border-{side}-color", _keeps_colour(value)) for side in _SIDES]
    border = _BORDER.match(prop)
    if border:  # `1px solid var(--x)`: the shorthand without its colour, and the colour of each side
        colour = _VAR.search(value)
        assert colour is not None
        rest = (value[: colour.start()] + value[colour.end():]).strip()
        sides = (border.group(1),) if border.group(1) else _SIDES
        return [(prop, rest), *((f"border-{side}-color", _keeps_colour(colour.group(0))) for side in sides)]
    return [(prop, _VAR.sub(lambda m: (m.group(1) or "").strip(), value))]  # a font, a size: the fallback


def _sanitizer_safe(style: str) -> str:
    declarations = []
    for part in style.split(";"):
        prop, _, value = part.partition(":")
        if prop.strip() and value.strip():
            declarations += _declarations(prop.strip(), value.strip())
    return "; ".join(f"{prop}: {value}" for prop, value in declarations)


def inline_styles(markup: str) -> str:
    """`markup` with the stylesheet's rules in each element's `style` attribute, in a form the sanitizer keeps."""
    import css_inline

    inlined = css_inline.inline_fragment(markup, f"{_RULES}{_token_rules()}")
    return _STYLE.sub(lambda m: f'style="{_sanitizer_safe(m.group(1))}"', inlined)
