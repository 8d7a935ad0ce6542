"""The stylesheet of the widgets, sent once per run as a `<style>` inside an `HTML` widget.

Colours come from JupyterLab's theme variables (with fallbacks), so light and dark themes both work.
"""

from __future__ import annotations

__all__ = ["STYLESHEET"]

STYLESHEET = """
<style>
.freeact-run { width: 100%; }
.freeact-run-header { align-items: center; gap: 8px; }
.freeact-banner { padding: 4px 8px; border-radius: 4px; margin: 2px 0;
  background: var(--jp-warn-color3, #fff3cd); color: var(--jp-ui-font-color1, #333); }
.freeact-panel { border: 1px solid var(--jp-border-color1, #bbb); border-radius: 6px;
  padding: 6px 8px; margin: 4px 0; width: auto; }
.freeact-panel.freeact-subagent { border-left: 4px solid var(--jp-brand-color1, #1976d2); margin-left: 4px; }
.freeact-panel.freeact-main { border-left: 4px solid var(--jp-ui-font-color2, #555); }
.freeact-panel-header { align-items: center; gap: 8px; flex-wrap: wrap; }
.freeact-id { font-family: var(--jp-code-font-family, monospace); font-weight: bold; }
.freeact-role { color: var(--jp-ui-font-color2, #666); }
.freeact-meta { color: var(--jp-ui-font-color2, #666); font-size: 90%; }
.freeact-state { padding: 1px 6px; border-radius: 8px; font-size: 90%; color: #fff; background: #757575; }
.freeact-state-running { background: #1976d2; }
.freeact-state-waiting { background: #ef6c00; }
.freeact-state-done { background: #2e7d32; }
.freeact-state-failed { background: #c62828; }
.freeact-state-cancelled, .freeact-state-rejected, .freeact-state-turn-limit { background: #6d4c41; }
.freeact-call { border: 1px solid var(--jp-border-color2, #ddd); border-radius: 4px; padding: 4px 6px; margin: 3px 0; }
.freeact-call.freeact-pending { border: 2px solid #ef6c00; }
.freeact-call-title { font-family: var(--jp-code-font-family, monospace); font-size: 90%; }
.freeact-decision { padding: 0 5px; border-radius: 6px; font-size: 85%; }
.freeact-decision-approved { background: #c8e6c9; color: #1b5e20; }
.freeact-decision-auto { background: #dcedc8; color: #33691e; }
.freeact-decision-rejected, .freeact-decision-cancelled { background: #ffcdd2; color: #b71c1c; }
.freeact-decision-waiting { background: #ffe0b2; color: #e65100; }
.freeact-code, .freeact-pre { margin: 2px 0; padding: 4px 6px; white-space: pre-wrap; word-break: break-word;
  background: var(--jp-cell-editor-background, #f7f7f7); border-radius: 3px;
  font-family: var(--jp-code-font-family, monospace); font-size: var(--jp-code-font-size, 13px); }
.freeact-output { background: var(--jp-layout-color2, #eee); }
.freeact-error { color: var(--jp-error-color1, #c62828); }
.freeact-thoughts { color: var(--jp-ui-font-color2, #666); font-style: italic; white-space: pre-wrap; }
.freeact-markdown p { margin: 2px 0; }
.freeact-approval { align-items: center; gap: 6px; flex-wrap: wrap; }
.freeact-always { align-items: center; gap: 6px; }
</style>
"""
