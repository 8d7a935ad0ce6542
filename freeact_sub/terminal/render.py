"""Events to rich output: every line says which agent it came from, in that agent's colour.

Complete items (thinking, responses, code, output lines, tool results, subagent lifecycles) are
printed as they happen; text still streaming is kept as a partial that the live view shows.
The main agent's thinking is shown dimmed; subagents' thinking is not shown at all.

What the model, a kernel, a tool or a file wrote is shown through `safe_text`: output and answers
with every terminal control removed, code and arguments to approve with controls drawn visibly.
Such text is drawn behind a prefix on every screen line it takes (`Gutter`): the agent's label
and a marker on its first line, a bar `│` on the others; only the CLI's own lines start at the left
edge with an agent's label, so nothing a cell prints can pass for an approval or a rule's decision.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.markdown import Markdown
from rich.panel import Panel
from rich.syntax import Syntax
from rich.text import Text

from freeact_sub import (
    AgentEvent,
    ApprovalRequest,
    CodeExecutionOutput,
    CodeExecutionOutputChunk,
    ContextCompacted,
    HookFailed,
    ModelRetry,
    ModelSlot,
    ModelUsage,
    Response,
    ResponseChunk,
    RunCancelled,
    SubagentFinished,
    SubagentMessage,
    SubagentQueued,
    SubagentReport,
    SubagentStarted,
    Thoughts,
    ThoughtsChunk,
    ToolOutput,
    TurnStarted,
)

from ..subagents.task_notes import batch_example, task_call_notes
from .batch_view import Batches
from .cell_lines import MARKER_WIDTH, CellLines
from .change_view import change_set_view
from .gutter import Gutter
from .palette import Palette
from .safe_text import clean, visible
from .status import SubagentBoard
from .wording import (
    compacted_note,
    decided_call,
    markdown,
    one_line,
    retry_note,
    running_state,
    seconds,
    title_line,
    waiting_for,
    what_it_runs,
)

__all__ = ["Renderer"]

_TOOL_RESULT_LINES = 20
_PARTIAL_LINES = 3


class Renderer:
    """Prints the events of one session to a rich console."""

    def __init__(
        self, console: Console, palette: Palette, board: SubagentBoard, *, main_id: str, show_final: bool = True
    ) -> None:
        self.console = console
        self.palette = palette
        self.board = board
        self.main_id = main_id
        self.show_final = show_final
        """Whether the main agent's final answer is printed (one-shot mode prints it to stdout instead)."""
        self._partials: dict[tuple[str, str], str] = {}
        self.cell_lines = CellLines(console, palette, self.refresh)
        """The output of running cells."""
        self.after_print: Callable[[], None] | None = None
        """Called after each printed item (the session redraws its live view)."""
        self._children: dict[str, str] = {}
        """Subagent ids by the `task` call that started them."""
        self._background: set[str] = set()
        """`task` calls that run their child in the background (their result comes when the child ends)."""
        self._answers: dict[str, str] = {}
        """Each subagent's last final answer (a background child's result is shown when it ends)."""
        self._waits_for: dict[str, list[str]] = {}
        """Per parent: the children of its foreground `task` calls that have not ended (its state names them)."""
        self.batches = Batches(palette)
        """The `map_tasks` batches: their rows' events are kept there, not printed one by one."""

    def reset(self) -> None:
        """Forget partial text and unfinished output lines (a new turn starts; the last may have failed)."""
        self._partials.clear()
        self.cell_lines.clear()
        self._waits_for.clear()
        self.batches.settle()

    # -- dispatch -------------------------------------------------------------------------

    def handle(self, event: AgentEvent) -> None:
        """Render one event (or remember it as a partial) and update the subagent board."""
        taken = self.batches.take(event)
        if taken is not None:  # an event of a batch's row: one live progress line, not lines per row
            for line in taken:  # one screen line each, cut with an ellipsis
                self.console.print(line, no_wrap=True, overflow="ellipsis")
            if taken:
                self.refresh()
            return
        agent = event.agent_id
        is_main = agent == self.main_id
        match event:
            case TurnStarted(turn=turn):
                self.board.turn(agent, turn)
            case ModelUsage(input_tokens=tokens_in, output_tokens=tokens_out, cost=cost):
                self.board.usage(agent, tokens_in + tokens_out, cost)
            case ModelRetry() as retry:
                self._partials.pop((agent, "text"), None)  # the failed attempt's text is dropped, never shown twice
                self._partials.pop((agent, "thinking"), None)
                self.board.retrying(agent, retry.at + retry.wait, retry_note(retry))
                body = Text.assemble(Text(f"retrying in {seconds(retry.wait)} · {retry_note(retry)}", style="yellow"),
                                     Text(f"  {one_line(retry.message)}" if retry.message else "", style="dim"))
                self._row(agent, Text("↻", style="yellow"), body)
            case ModelSlot(waiting=waiting, limit=limit):
                self.board.set_state(agent, "waiting for a model slot" if waiting else "thinking")
                if waiting and is_main:
                    self._row(agent, Text("…", style="dim"),
                              Text(f"waiting for a model request slot ({limit} in flight)", style="dim"))
            case ThoughtsChunk(content=content):
                if is_main:
                    self._grow(agent, "thinking", content)
            case Thoughts(content=content):
                self._partials.pop((agent, "thinking"), None)
                if is_main:
                    self._row(agent, Text("thinks", style="dim"), Text(clean(content).strip(), style="dim italic"))
            case ResponseChunk(content=content):
                self._grow(agent, "text", content)
            case Response(content=content, final=final):
                self._partials.pop((agent, "text"), None)
                if final and not is_main:
                    self._answers[agent] = content
                if content.strip() and (self.show_final or not (is_main and final)):
                    self._row(agent, Text("›", style=self.palette.colour(agent)), self._markdown(content))
            case ApprovalRequest() as request:
                if request.tool_name == "task" and request.tool_args.get("run_in_background"):
                    self._background.add(request.tool_call_id)
                by = f" by rule {request.rule}" if request.rule else f" by hook {request.hook}" if request.hook else ""
                if request.hook and request.decision is None:
                    self.show_rewrite(request)
                if request.auto_approved:
                    self.show_request(request, note=f"auto-approved{by}")
                elif request.decision is False:  # refused before anyone was asked
                    self._row(agent, Text("✗", style="red"),
                              Text(clean(f"{request.tool_name} refused{by}: {request.reason or ''}".rstrip(": "))))
                else:
                    self.board.set_state(agent, f"waiting for approval of {what_it_runs(request)}")
            case HookFailed() as failure:
                self._row(agent, Text("⚠", style="yellow"), Text(clean(
                    f"hook {failure.hook} failed at {failure.hook_event_name}: {failure.message} "
                    "(it was left out: the step went on as without it)"), style="yellow"))
            case CodeExecutionOutputChunk(content=text, tool_call_id=call_id):
                self.cell_lines.add(agent, call_id, text)
            case CodeExecutionOutput() as output:
                self._output_done(output)
            case ToolOutput() as output:
                self._tool_output(output)
            case SubagentQueued(subagent_id=child, prompt=prompt):
                self.palette.set_type(child, event.agent_type)
                self.palette.set_parent(child, agent)
                self.board.queued(child, agent_type=event.agent_type, parent_id=agent)
                self._children[event.tool_call_id] = child
                self._waiting_on(agent, child, event.tool_call_id)
                first_line = title_line(event.description or prompt)
                body = Text.assemble("queued ", self.palette.label(child), Text(f"  {first_line}", style="dim"),
                                     Text("  (waiting for a slot)", style="dim"))
                self._row(agent, Text("…", style="dim"), body)
            case SubagentStarted(subagent_id=child, prompt=prompt, max_turns=max_turns, tool_call_id=call_id):
                self.palette.set_type(child, event.agent_type)
                self.palette.set_parent(child, agent)
                self.board.started(child, max_turns, agent_type=event.agent_type, model=event.model,
                                   parent_id=agent)
                self._children[call_id] = child
                self._waiting_on(agent, child, call_id)
                first_line = title_line(event.description or prompt)
                body = Text.assemble("started ", self.palette.label(child), Text(f"  {first_line}", style="dim"))
                if event.sandbox:
                    limits = f"; {event.sandbox_limits}" if event.sandbox_limits else ""
                    body.append(clean(f"  [sandbox: {event.sandbox}{limits}]"), style="dim")
                self._row(agent, Text("+", style="bold"), body)
            case SubagentFinished(subagent_id=child, status=status, turns_used=turns, elapsed=elapsed):
                self.board.finished(child, status, turns, elapsed)
                if child in self._waits_for.get(agent, ()):
                    self._waits_for[agent].remove(child)
                    if self._waits_for[agent]:
                        self.board.set_state(agent, waiting_for(self._waits_for[agent]))
                style = "green" if status == "done" else "yellow" if status != "failed" else "red"
                body = Text.assemble(
                    self.palette.label(child),
                    Text(f" {status.replace('_', ' ')}", style=style),
                    Text(f" after {elapsed:.1f} s, {turns} turn{'s' if turns != 1 else ''}", style="dim"),
                    Text(f" (and {event.waited:.1f} s waiting for a slot)" if event.waited >= 0.1 else "", style="dim"),
                )
                self._row(agent, Text("■", style=style), body)
                answer = self._answers.pop(child, None)
                if event.tool_call_id in self._background and answer is not None:  # what its parent is told
                    heading = Text.assemble("result of ", self.palette.label(child))
                    marker = Text("←", style=self.palette.colour(agent))
                    self._row(agent, marker, Group(heading, self._markdown(answer)))
            case SubagentMessage(subagent_id=child, content=text, sender=sender):
                source = "you" if sender == "user" else agent
                body = Text.assemble(Text(f"message from {source} to ", style="dim"), self.palette.label(child),
                                     Text(": ", style="dim"), Text(clean(text)))
                self._row(agent, Text("→", style="bold"), body)
            case SubagentReport(parent_id=parent, content=text):
                body = Text.assemble(Text("reports to ", style="dim"), self.palette.label(parent),
                                     Text(": ", style="dim"), Text(clean(text)))
                self._row(agent, Text("↑", style=self.palette.colour(agent)), body)
            case ContextCompacted() as compacted:
                self._row(agent, Text("⇣", style="cyan"), Text(clean(compacted_note(compacted)), style="cyan"))
            case RunCancelled():
                self.cell_lines.flush()
                self._partials.clear()
                self._row(agent, Text("✗", style="yellow"), Text("turn cancelled", style="yellow"))

    # -- approvals ------------------------------------------------------------------------

    def show_rewrite(self, request: ApprovalRequest) -> None:
        """Say that a `PreToolUse` hook rewrote a call's arguments before a person was asked."""
        self._row(request.agent_id, Text("↻", style="yellow"),
                  Text(clean(f"hook {request.hook} rewrote the arguments of {request.tool_name}"), style="dim"))

    def show_request(self, request: ApprovalRequest, *, note: str | None = None) -> None:
        """Print what an approval request would run: code with syntax highlighting, or the tool call.

        A `note` says the request is already approved (auto-approved, a standing decision). What would
        run is shown whole: controls and invisible characters in it are drawn, never removed.
        """
        agent = request.agent_id
        if request.tool_name == "task" and request.tool_args.get("run_in_background"):
            self._background.add(request.tool_call_id)
        if note:
            self.board.set_state(agent, running_state(request))
        colour = self.palette.colour(agent)
        origin = "  from code in its cell" if request.source == "code" else ""
        if (row := self.batches.row_name(agent)) is not None:
            origin += f"  · batch {row}"
        title = Text.assemble(
            Text(visible(request.tool_name), style="bold"),
            Text(origin, style="italic"),
            Text(f"  {note}", style="dim") if note else "",
        )
        marker = Text("→", style=colour)
        room = self.console.width - self._gutter(agent, marker, "").first.cell_len - 6  # the frame's corners, spaces
        body: RenderableType
        if request.code is not None:
            code = visible(request.code)
            # a line too long for the frame goes on over the next: numbered lines show where each really starts
            numbered = any(cell_len(line) > room + 2 for line in code.splitlines())
            body = Syntax(code, "python", theme=self.palette.code_theme, word_wrap=True, background_color="default",
                          line_numbers=numbered)
        elif request.changes is not None:
            body = change_set_view(request.changes, self.palette.code_theme)
        elif request.tool_name == "task":
            notes = task_call_notes(request.tool_args)
            prompt = Text(visible(str(request.tool_args.get("prompt", ""))))
            body = Group(prompt, Text(visible(" · ".join(notes)), style="dim")) if notes else prompt
            if (example := batch_example(request.tool_args)) is not None:  # what one row will read
                body = Group(body, Text.assemble((example[0], "dim"), visible(example[1])))
        else:
            body = Text(visible(json.dumps(request.tool_args, ensure_ascii=False, indent=None) or "{}"))
        if note and title.cell_len > room:  # a title too long for the frame is cut: the note goes inside, whole
            title = Text.assemble(Text(visible(request.tool_name), style="bold"), Text(origin, style="italic"))
            body = Group(Text(note, style="dim"), body)
        panel = Panel(body, title=title, title_align="left", border_style=colour, padding=(0, 1))
        self._row(agent, marker, panel, framed=True)

    def show_decision(self, request: ApprovalRequest, text: str, *, approved: bool, goes_on: bool = False) -> None:
        """Print how a request was decided; `goes_on` says a rejected agent continues (it was given a reason)."""
        mark = Text("✓" if approved else "✗", style="green" if approved else "red")
        line = Text.assemble(Text(clean(text), style="green" if approved else "red"),  # a saved reason too
                             Text(f" · {decided_call(request)}", style="dim"))
        self._row(request.agent_id, mark, line)
        if approved:
            self.board.set_state(request.agent_id, running_state(request))
        else:
            self.board.set_state(request.agent_id, "thinking" if goes_on else "rejected")

    def refresh(self) -> None:
        """Redraw the live view now (e.g. right after its question was answered)."""
        if self.after_print is not None:
            self.after_print()

    def note(self, text: str, style: str = "dim", *, detail: str | None = None) -> None:
        """A line that belongs to no agent (cancelling, errors); `detail` is text the CLI did not write (an
        error's message): it follows `text`, its further lines behind a bar."""
        if detail is None:
            self.console.print(Text(text, style=style))
        else:
            head = Text(f"{text} ", style=style)
            bar = Text.assemble(" " * (head.cell_len - 2), ("│ ", "dim"))
            self.console.print(Gutter(Text(clean(detail), style=style), head, bar))
        if self.after_print is not None:
            self.after_print()

    # -- live view ------------------------------------------------------------------------

    def partials(self) -> list[RenderableType]:
        """The text still streaming, last few lines per agent, for the live view."""
        rows: list[RenderableType] = []
        for (agent, kind), text in list(self._partials.items()):
            lines = clean(text).strip().splitlines()[-_PARTIAL_LINES:]
            if not lines:
                continue
            style = "dim italic" if kind == "thinking" else ""
            marker = Text("thinks" if kind == "thinking" else "›", style="dim" if kind == "thinking" else "")
            rows.append(self._gutter(agent, marker, Text("\n".join(lines), style=style)))
        return rows

    # -- helpers --------------------------------------------------------------------------

    def _markdown(self, text: str) -> Markdown:
        return markdown(text, self.palette.code_theme)

    def _grow(self, agent: str, kind: str, content: str) -> None:
        key = (agent, kind)
        self._partials[key] = self._partials.get(key, "") + content

    def _gutter(self, agent: str, marker: Text, body: RenderableType, *, framed: bool = False) -> Gutter:
        """`body` after the agent's label and `marker`; its further lines behind the agent's bar (or, when the
        body draws its own frame on every line, behind blanks)."""
        label = Text.assemble(self.palette.indent(agent), self.palette.label(agent))
        pad = " " * max(MARKER_WIDTH - marker.cell_len, 0)
        first = Text.assemble(label, " ", pad, marker, " ")
        rest = Text(" " * first.cell_len) if framed else Text.assemble(
            " " * (first.cell_len - 2), ("│", f"dim {self.palette.colour(agent)}"), " ")
        return Gutter(body, first, rest)

    def _row(self, agent: str, marker: Text, body: RenderableType, *, framed: bool = False) -> None:
        self.console.print(self._gutter(agent, marker, body, framed=framed))
        if self.after_print is not None:
            self.after_print()

    def _output_done(self, output: CodeExecutionOutput) -> None:
        agent = output.agent_id
        self.cell_lines.end(agent, output.tool_call_id)
        shown = self.cell_lines.shown_images
        images = [f"[image saved: {image}]" for image in output.images if str(image) not in shown]
        self.cell_lines.print_lines(agent, images)
        if output.status != "ok":
            status = {
                "error": "the cell raised an error",
                "timeout": "the cell timed out",
                "kernel_died": "the kernel died",
            }
            self._row(agent, Text("!", style="red"), Text(status.get(output.status, output.status), style="red"))
        self._after_tool(agent, "thinking")

    def _tool_output(self, output: ToolOutput) -> None:
        agent = output.agent_id
        style = "red" if output.is_error else ""
        child = self._children.get(output.tool_call_id) if output.tool_name == "task" else None
        if child is not None and child in self._waits_for.get(agent, ()):  # its result: whichever event came first
            self._waits_for[agent].remove(child)
        if output.tool_name == "task" and not output.is_error and output.tool_call_id not in self._background:
            heading = Text.assemble("result of ", self.palette.label(child)) if child else Text("task result")
            marker = Text("←", style=self.palette.colour(agent))
            self._row(agent, marker, Group(heading, self._markdown(output.content or "(no answer)")))
            self._after_tool(agent, "thinking")
            return
        lines = clean(output.content).splitlines() or [""]
        if len(lines) > _TOOL_RESULT_LINES:
            lines = [*lines[:_TOOL_RESULT_LINES], f"… {len(lines) - _TOOL_RESULT_LINES} more lines"]
        body = Text.assemble(
            Text(clean(output.tool_name), style="bold"), Text(" → ", style="dim"),
            Text("\n".join(lines), style=style)
        )
        self._row(agent, Text("←", style="red" if output.is_error else self.palette.colour(agent)), body)
        self._after_tool(agent, "running code" if output.source == "code" else "thinking")

    def _waiting_on(self, parent: str, child: str, call_id: str) -> None:
        """A foreground `task` call of `parent` started `child`: the parent's state names whom it waits for."""
        if call_id in self._background:
            return
        children = self._waits_for.setdefault(parent, [])
        if child not in children:
            children.append(child)
        self.board.set_state(parent, waiting_for(children))

    def _after_tool(self, agent: str, state: str) -> None:
        """A tool call of `agent` returned: it goes on with `state`, unless other children of it are still working."""
        children = self._waits_for.get(agent)
        self.board.set_state(agent, waiting_for(children) if children else state)


