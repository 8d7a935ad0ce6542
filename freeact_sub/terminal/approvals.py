"""Approval questions from parallel agents: a short numbered list, answered in any order.

Requests arrive interleaved in the one event stream. The stream consumer only hands them to
this desk; the desk keeps the undecided ones in arrival order and shows them at the bottom of
the live view. One question is selected: the oldest, unless the person picks another with its
number (1–9), Tab or Shift-Tab. Keys answer the selected question: y (yes), n (no: then an optional
one-line reason for the model, Enter alone rejects without one, Esc goes back), a (always for
this agent), A (always, for every agent, for the rest of the session), s (stop the subagent
that asks: its parent is told the user stopped it and goes on; offered when the desk was
given a `stop` function and the question is a subagent's). With one question waiting, the view
is the single line it has always been.

Typing meant for the prompt must not answer a question. `A` (every agent, for the rest of the
session) asks to confirm with `y`. Keys that `n` or `A` would take next are left out while they come
in the same burst of typing as that key (less than `BURST_GAP` apart: nobody reads the new line that
fast), so `nice, and then` is not a rejection with the reason `ice, and then` and `Also` does not
approve every agent; Enter right after `n` is still a bare rejection. A key that answers nothing is
ignored with a hint. Only keys read from the keyboard (`run()`, or `press(key, at=...)`) are timed;
`press(key)` from code (`/n reason` at the prompt) is taken as it comes.

The desk outlives a turn: `submit()` may come at any time (a background subagent's request between
turns); `press()` takes one key from whatever reads the keyboard (`run()`: a `KeyReader`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.text import Text

from freeact_sub import ApprovalPolicy, ApprovalRequest

from .change_view import pick_files
from .keys import BACK_TAB, ESCAPE, KeyReader
from .palette import Palette
from .render import Renderer
from .safe_text import visible
from .typed_line import TypedLine

__all__ = ["ApprovalDesk"]

MAX_LISTED = 9
"""How many questions the list shows and numbers (one key each); later ones wait below a count."""

_QUESTIONS = {"execute_ipython_cell": "Run this code?", "task": "Start this subagent?",
              "reset_kernel": "Reset the kernel?", "apply_changes": "Apply these changes to the folder?"}
_ENTER = ("\r", "\n")
_BACKSPACE = ("\x7f", "\b")
_CLEAR_LINE = "\x15"  # Ctrl-U
_SUMMARY_CHARS = 60
BURST_GAP = 0.3
"""Seconds: keys closer together than this are one burst of typing (a word typed, a paste)."""


@dataclass
class _Reason:
    """A rejection reason being typed for one request."""

    request: ApprovalRequest
    text: str = ""
    files: bool = False
    """Typing the numbers of the files of a change set to apply (`f`), not a reason."""


@dataclass
class _Confirm:
    """`A` was pressed for this request: approving every agent waits for `y`."""

    request: ApprovalRequest


@dataclass
class _Burst:
    """Keys of the burst that opened a reason or a confirmation: left out until a pause."""

    last: float
    dropped: str = ""


class ApprovalDesk:
    """Holds the undecided requests and decides them from the person's keys."""

    def __init__(
        self, renderer: Renderer, palette: Palette, policy: ApprovalPolicy,
        stop: Callable[[str], bool] | None = None,
    ) -> None:
        """`stop(agent_id)` stops a subagent (e.g. `Agent.cancel_subagent`) and says whether one was running;
        with it, `s` on a subagent's question stops that subagent."""
        self._renderer = renderer
        self._palette = palette
        self._policy = policy
        self._stop = stop
        self.on_line: Callable[[str], None] | None = None
        """Gets a line typed while no question waits (`/agents` during a turn)."""
        self._typed = TypedLine()
        self._stopped: set[str] = set()
        """Subagents stopped from the desk: their questions leave the list at once (the cancel rejects them)."""
        self._requests: list[ApprovalRequest] = []
        self._selected: ApprovalRequest | None = None
        self._reason: _Reason | None = None
        self._confirm: _Confirm | None = None
        self._burst: _Burst | None = None
        self._hinted = False
        self._nobody_answers = False

    @property
    def pending(self) -> list[ApprovalRequest]:
        """The undecided requests in arrival order (a request decided elsewhere, e.g. by a cancel, drops out)."""
        self._requests = [r for r in self._requests if not r.decided and r.agent_id not in self._stopped]
        return list(self._requests)

    @property
    def waiting(self) -> int:
        """How many requests wait for a decision."""
        return len(self.pending)

    @property
    def selected(self) -> ApprovalRequest | None:
        """The request the next answer key decides: the one picked, else the oldest."""
        pending = self.pending[:MAX_LISTED]
        if self._selected not in pending:
            self._selected = pending[0] if pending else None
        return self._selected

    # -- input ----------------------------------------------------------------------------

    def submit(self, request: ApprovalRequest) -> None:
        """Take a request that needs a decision and show what it would do."""
        if request.decided:
            return
        self._stopped.discard(request.agent_id)  # it asks again: it runs again (resumed)
        if self._policy.is_approved(request.agent_id):
            self._approve_standing(request)
            return
        if self._nobody_answers:
            self._decide(request, "n")
            return
        self._renderer.show_request(request)
        self._requests.append(request)

    def press(self, key: str, at: float | None = None) -> bool:
        """Handle one key; returns whether it decided a request. An empty string means input has ended.

        `at` (a `time.monotonic()` reading) is when the key was typed: keys typed in one burst with the `n` or
        `A` before them are left out (see the module's docstring). Without it, the key is taken as it comes.
        """
        if key == "":
            self.close_input()
            return True
        request = self.selected
        if request is None:  # typed while nothing was asked: not an answer to a later question, maybe a command
            line = self._typed.key(key)
            if line and self.on_line is not None:
                self.on_line(line)
            return False
        if self._in_burst(key, at):
            return False
        if self._reason is not None and self._reason.request is request:
            return self._type_reason(key)
        self._reason = None
        if self._confirm is not None:
            confirmed = self._confirm.request is request and key in ("y", "Y")
            self._confirm = None
            if confirmed:
                self._decide(request, "A")
                return True
            self._renderer.note("Not approved for every agent: the question waits.", style="yellow")
            return False
        if key in ("\t", BACK_TAB):
            pending = self.pending[:MAX_LISTED]
            step = 1 if key == "\t" else -1
            self._selected = pending[(pending.index(request) + step) % len(pending)]
        elif key.isdigit() and 1 <= int(key) <= min(len(self.pending), MAX_LISTED):
            self._selected = self.pending[int(key) - 1]
        elif key in ("y", "Y", "a"):
            self._decide(request, key if key == "a" else "y")
            return True
        elif key == "A":
            self._confirm = _Confirm(request)
            self._burst = _Burst(at) if at is not None else None
        elif key in ("n", "N"):
            self._reason = _Reason(request)
            self._burst = _Burst(at) if at is not None else None
        elif key == "f" and request.changes is not None:
            self._reason = _Reason(request, files=True)
        elif key == "s" and self._can_stop(request):
            self._stop_asker(request)
            return True
        elif key.isprintable() and not self._hinted:
            self._hinted = True  # once per question: typing a sentence here gives one hint, not one per letter
            keys = "y, n, a or A" + (", s" if self._can_stop(request) else "")
            self._renderer.note(f"{key!r} answers nothing: {keys} answer the question waiting below (other keys "
                                "are ignored; type your prompt once it is answered).", style="yellow")
        return False

    def _in_burst(self, key: str, at: float | None) -> bool:
        """Whether `key` came in the burst of typing that opened the reason or the confirmation: then it is left
        out (Enter right after `n` alone still rejects)."""
        burst = self._burst
        if burst is None or at is None:
            return False
        if at - burst.last >= BURST_GAP:
            self._burst = None
            return False
        burst.last = at
        if key in _ENTER and not burst.dropped and self._reason is not None:
            self._burst = None
            return False  # `n` and Enter: the bare rejection the person typed
        burst.dropped += key
        return True

    def close_input(self) -> None:
        """Nobody can answer any more (stdin ended, or there is no terminal): reject what waits and what comes."""
        self._nobody_answers = True
        self._reason, self._confirm, self._burst = None, None, None
        for request in self.pending:
            self._decide(request, "n")

    async def run(self, keys: KeyReader | None) -> None:
        """Answer requests with keys from `keys` until cancelled; without keys, reject every request."""
        if keys is None:
            self.close_input()  # the CLI refuses to start without a terminal unless everything is auto-approved
            return
        while True:
            key = await keys.get()
            if key == "":
                self.close_input()  # stdin ended: nobody can answer
                return
            if self.press(key, time.monotonic()):
                keys.discard_typed_ahead()  # a double-pressed key must not answer the next question
            self._renderer.refresh()  # a selection or a typed reason shows at once

    def _type_reason(self, key: str) -> bool:
        assert self._reason is not None
        if key in _ENTER:
            request, reason, files = self._reason.request, self._reason.text.strip(), self._reason.files
            self._reason = None
            if files and request.changes is not None:
                chosen = pick_files(request.changes, reason)
                self._decide(request, "y" if chosen else "n", None if chosen else "no file was chosen")
                return True
            self._decide(request, "n", reason or None)
            return True
        if key == ESCAPE:
            self._reason = None
        elif key in _BACKSPACE:
            self._reason.text = self._reason.text[:-1]
        elif key == _CLEAR_LINE:
            self._reason.text = ""
        elif key.isprintable():
            self._reason.text += key
        return False

    # -- decisions ------------------------------------------------------------------------

    def _decide(self, request: ApprovalRequest, answer: str, reason: str | None = None) -> None:
        agent = request.agent_id
        self._hinted, self._burst, self._confirm = False, None, None
        if answer == "n":
            request.reject(reason)
        else:
            request.approve(True)
        if answer == "a":
            self._policy.always(agent)
        elif answer == "A":
            self._policy.always_all()
        # waiting requests a new standing decision covers run at once, in arrival order
        covered = [r for r in self.pending if self._policy.is_approved(r.agent_id)] if answer in ("a", "A") else []
        for waiting in covered:
            waiting.approve(True)
        # the answered questions leave the live view before the decisions are printed above it (printing
        # during a live view repeats its last frame below the new lines)
        self._renderer.refresh()
        if answer == "n":
            text = f"rejected, the model is told: {reason}" if reason else "rejected"
            self._renderer.show_decision(request, text, approved=False, goes_on=reason is not None)
        else:
            text = {
                "a": f"approved, and always for {agent} from now on",
                "A": "approved, and always for every agent from now on",
            }.get(answer, "approved")
            self._renderer.show_decision(request, text, approved=True)
        for waiting in covered:
            self._renderer.show_request(waiting, note="auto-approved (standing decision)")

    def _can_stop(self, request: ApprovalRequest) -> bool:
        """Whether `s` is offered for this question: a stop function is known and a subagent asks."""
        return self._stop is not None and request.agent_id != self._renderer.main_id

    def _stop_asker(self, request: ApprovalRequest) -> None:
        assert self._stop is not None
        agent = request.agent_id
        stopped = self._stop(agent)
        if stopped:
            self._stopped.add(agent)  # its waiting questions go; the cancel rejects them in the child
        self._renderer.refresh()
        if stopped:
            self._renderer.show_decision(request, "stopping this subagent; its parent is told and goes on",
                                         approved=False, goes_on=True)
        else:
            self._renderer.note(f"{agent} is not running any more.", style="yellow")

    def _approve_standing(self, request: ApprovalRequest) -> None:
        request.approve(True)
        self._renderer.show_request(request, note="auto-approved (standing decision)")

    # -- the view -------------------------------------------------------------------------

    def view(self) -> RenderableType | None:
        """The waiting questions for the bottom of the live view; None when nothing waits."""
        selected = self.selected
        if selected is None:
            return None
        pending = self.pending
        if len(pending) == 1:
            return self._line(selected, selected=True)
        listed = pending[:MAX_LISTED]
        stop = self._can_stop(selected)
        header = self._fit(
            Text(f"{len(pending)} questions wait · 1–{len(listed)} or Tab picks one, y/n/a/A answers it"
                 + (", s stops its subagent" if stop else ""), style="bold"),
            Text(f"{len(pending)} questions · 1–{len(listed)}/Tab picks, y/n/a/A answers"
                 + (", s stops" if stop else ""), style="bold"),
        )
        rows: list[RenderableType] = [header]
        for number, request in enumerate(listed, start=1):
            chosen = request is selected
            prefix = Text.assemble(("›" if chosen else " ", "bold"), f" {number} ")
            rows.append(Text.assemble(prefix, self._line(request, selected=chosen, indent=prefix.cell_len)))
        if len(pending) > len(listed):
            rows.append(Text(f"    … and {len(pending) - len(listed)} more after these", style="dim"))
        return Group(*rows)

    def _fit(self, full: Text, short: Text, indent: int = 0) -> Text:
        """`full` if it fits the terminal's width on one line (after `indent` cells), else `short`: at 80 columns a
        question is one line, never wrapped under the live view."""
        return full if indent + full.cell_len <= self._renderer.console.width else short

    def _line(self, request: ApprovalRequest, *, selected: bool, indent: int = 0) -> Text:
        agent = request.agent_id
        count = request.tool_args.get("count") if request.tool_name == "task" else None  # a batch from code
        question = f"Start these {count} subagents?" if isinstance(count, int) else _QUESTIONS.get(
            request.tool_name, f"Call {visible(request.tool_name)}?")
        line = Text.assemble(self._palette.tag(agent), " ")
        if (row := self._renderer.batches.row_name(agent)) is not None:  # a batch's row asks: say which
            line.append(f"({row}) ", style="dim")
        if not selected:
            room = self._renderer.console.width - indent - line.cell_len - len(question) - 2
            return Text.assemble(line, question, "  ", (_summary(request, max(room, 12)), "dim"))
        dropped = self._burst.dropped if self._burst is not None else ""
        left_out = (f"[left out, typed with the key before: {' '.join(visible(dropped).split())[:20]}] "
                    if dropped.strip() else "")
        if self._reason is not None and self._reason.request is request and self._reason.files:
            head = Text.assemble(("Apply only the files numbered", "bold"), " (e.g. 1 3; Enter applies, Esc: back): ")
            return Text.assemble(line, head, self._reason.text, ("▏", "blink"))
        if self._reason is not None and self._reason.request is request:
            head = self._fit(
                Text.assemble(("Reject. Reason for the model", "bold"),
                              " (Enter alone rejects without one, Esc goes back): "),
                Text.assemble(("Reject. Reason", "bold"), " (Enter: none, Esc: back): "),
                indent + line.cell_len + 20,  # room for the reason's first words
            )
            shown = Text.assemble(line, head, (left_out, "yellow"))
            room = self._renderer.console.width - indent - shown.cell_len - 1  # the cursor's cell
            return Text.assemble(shown, _tail(self._reason.text, room), ("▏", "blink"))
        if self._confirm is not None and self._confirm.request is request:
            head = self._fit(
                Text.assemble(("Approve every agent's actions, for the rest of the session?", "bold"),
                              "  ", ("[y]", "bold"), "es, any other key goes back  "),
                Text.assemble(("Every agent, from now on?", "bold"), " ", ("[y]", "bold"), "es, other key: back "),
                indent + line.cell_len,
            )
            return Text.assemble(line, head, (left_out, "yellow"))
        full = Text.assemble(
            line, f"{question}  ",
            ("[y]", "bold"), "es  ", ("[n]", "bold"), "o  ",
            ("[a]", "bold"), "lways for ", self._palette.label(agent), "  ",
            ("[A]", "bold"), "ll agents",
        )
        short = Text.assemble(
            line, f"{question}  ", ("[y]", "bold"), "es ", ("[n]", "bold"), "o ", ("[a]", "bold"), "lways ",
            ("[A]", "bold"), "ll",
        )
        if request.changes is not None:
            full.append_text(Text.assemble("  ", ("[f]", "bold"), "iles: some of them"))
            short.append_text(Text.assemble(" ", ("[f]", "bold"), "iles"))
        if self._can_stop(request):
            full.append_text(Text.assemble("  ", ("[s]", "bold"), "top ", self._palette.label(agent)))
            short.append_text(Text.assemble(" ", ("[s]", "bold"), "top"))
        return self._fit(full, short, indent)


def _tail(text: str, room: int) -> str:
    """The end of a reason being typed, in `room` cells: `…` and its last words when all of it does not fit (the
    line stays one line; what was typed stays whole, only its start is out of sight)."""
    if cell_len(text) <= room:
        return text
    shown = ""
    for char in reversed(text):
        if cell_len(char + shown) > max(room - 1, 0):
            break
        shown = char + shown
    return "…" + shown


def _summary(request: ApprovalRequest, limit: int = 60) -> str:
    """The call in a few words: its first line of code, the subagent's prompt, or the arguments (controls drawn)."""
    if request.code is not None:
        lines = [line for line in request.code.strip().splitlines() if line.strip()]
        text = lines[0] if lines else ""
    elif request.tool_name == "task":
        text = str(request.tool_args.get("prompt", ""))
    else:
        text = json.dumps(request.tool_args, ensure_ascii=False)
    text = " ".join(visible(text).split())
    limit = min(limit, _SUMMARY_CHARS)
    return text if len(text) <= limit else text[: limit - 1] + "…"
