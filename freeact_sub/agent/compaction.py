"""Context compaction: a history that would overflow the model's context window becomes a summary plus its latest
rounds.

Before each model round `round_with_room` measures the next request (`models.context`); past
`compact_at` of the window the agent compacts first (`auto`). A provider that refuses a request as
longer than the window (pydantic-ai's `ModelContextWindowExceededError`: OpenAI's
`context_length_exceeded`, Anthropic's "prompt is too long") gets one compaction and the round once
more (`overflow`). `Agent.compact()` and `/compact` ask for one (`manual`).

A compaction: the `PreCompact` hooks (a `deny` skips it; a `note` joins the focus), the kernel's live
names (`%whos`, run as a hidden cell), one model request without tools that summarizes the older
rounds, then the history becomes [summary request, the latest rounds verbatim] and `ContextCompacted`
says how many tokens before and after. The saved session keeps the full record (`sessions show`) and
resumes from the compacted history. Each agent, a child too, compacts its own history.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ModelError
from ..events import ContextCompacted, ModelSlot, ModelUsage
from ..models import retries
from ..models.context import context_window, estimate_tokens, is_overflow
from ..models.request import Attempt, send
from ..models.retries import backoff, provider_wait, retry_reason
from .compaction_text import SUMMARY_SYSTEM_PROMPT, compacted_request, cut_point, latest_prompt, summary_prompt
from .model_round import model_round

if TYPE_CHECKING:
    from collections.abc import Callable

    from pydantic_ai.messages import ModelResponse
    from pydantic_ai.models import Model

    from ..events import AgentEvent, Emit
    from .turn_owner import TurnOwner

__all__ = ["Trigger", "between_turns", "compact", "next_request_tokens", "round_with_room"]

Trigger = Literal["auto", "manual", "overflow"]
WHOS = "get_ipython().run_line_magic('whos', '')"
"""The hidden cell that lists the kernel's live names with their types (IPython's `%whos`)."""
NAMES_CHARS = 6_000
"""At most this much of `%whos` goes to the model (the kernel's output is untrusted text, and may be long)."""
NAMES_TIMEOUT = 10.0
TAIL_SHARE = 0.25
"""The latest rounds kept verbatim fill at most this share of the window (of the history, where it is unknown)."""
SUMMARY_INPUT_SHARE = 0.5
"""The summary request holds at most this share of the window: it must fit even when the history overflowed."""


def next_request_tokens(owner: TurnOwner) -> int:
    """The tokens the agent's next request would hold (measured by the provider where it could be)."""
    conversation = owner.conversation
    tools = sum(len(d.description or "") + len(json.dumps(d.parameters_json_schema))
                for d in owner.parts.toolbox.definitions())
    return estimate_tokens(conversation.messages, measured_from=conversation.measured_from, extra_chars=tools,
                           cache=conversation.sizes)


async def round_with_room(
    owner: TurnOwner, emit: Emit, model: Model, *, ran_nothing: Callable[[], bool]
) -> ModelResponse:
    """`model_round`, with room made first: compacted before a request past `compact_at` of the window, and once
    more (then the round again) when the provider refuses the request as too long."""
    settings = owner.settings
    window, _ = context_window(model, settings.context_window)
    if window is not None and settings.compact_at is not None:
        tokens = next_request_tokens(owner)
        if tokens >= window * settings.compact_at:
            await compact(owner, emit, model, trigger="auto", tokens=tokens)
    try:
        return await model_round(owner, emit, model, ran_nothing=ran_nothing)
    except ModelError as error:
        if not is_overflow(error):
            raise
        if await compact(owner, emit, model, trigger="overflow") is None:
            raise
    return await model_round(owner, emit, model, ran_nothing=ran_nothing)


async def compact(
    owner: TurnOwner, emit: Emit, model: Model, *, trigger: Trigger, focus: str | None = None,
    tokens: int | None = None,
) -> ContextCompacted | None:
    """Compact `owner`'s history now; the event, or None if nothing was compacted (a hook said `deny`, there is
    nothing older than the rounds kept, or the summary came back empty). A failed summary request raises
    `ModelError` and changes nothing."""
    started = time.time()
    settings, conversation = owner.settings, owner.conversation
    window, _ = context_window(model, settings.context_window)
    before = tokens if tokens is not None else next_request_tokens(owner)
    if owner.hooks.wants("PreCompact"):
        fields = {"trigger": trigger, "focus": focus, "tokens": before, "context_window": window}
        answers = await owner.hooks.ask("PreCompact", owner.hook_context(), fields, emit)
        if any(answer.decision == "deny" for answer in answers):
            return None
        notes = [answer.note for answer in answers if answer.note]
        focus = "; ".join([*([focus] if focus else []), *notes]) or None
    messages = list(conversation.messages)
    cut = cut_point(messages, settings.compact_keep_rounds, int((window or before) * TAIL_SHARE))
    if cut < 2:
        return None  # nothing older than what is kept
    names = await kernel_names(owner)
    older, kept = messages[:cut], messages[cut:]
    budget = int((window or before) * SUMMARY_INPUT_SHARE)
    try:
        response = await _summary_response(owner, emit, model, summary_prompt(older, names, focus=focus,
                                                                              budget_tokens=budget))
    except ModelError as error:  # the window is smaller than we thought: once more, in a quarter of the room
        if not is_overflow(error):
            raise
        response = await _summary_response(owner, emit, model, summary_prompt(older, names, focus=focus,
                                                                              budget_tokens=budget // 4))
    summary = "".join(p.content for p in response.parts if p.part_kind == "text")
    if not summary.strip():
        return None  # a summary request answered without text: the history stays as it is
    prompt = latest_prompt(older) if latest_prompt(kept) is None else None
    record: dict[str, Any] = {"trigger": trigger, "focus": focus, "tokens_before": before, "started": started,
                              "context_window": window,
                              "messages_summarized": len(older), "messages_kept": len(kept), "prompt": prompt}
    first = compacted_request(messages[0], summary, names, prompt, focus=focus,  # type: ignore[arg-type]
                              continue_note=not kept, metadata=record)
    history = [first, *kept]
    record["tokens_after"] = after = estimate_tokens(history, measured_from=len(history))
    conversation.compacted(history, kept=len(kept), summary_response=response)
    event = ContextCompacted(agent_id=owner.agent_id, trigger=trigger, tokens_before=before, tokens_after=after,
                             context_window=window, summary=summary, messages_summarized=len(older),
                             messages_kept=len(kept), focus=focus, started=started)
    emit(event)
    return event


async def between_turns(owner: TurnOwner, focus: str | None) -> ContextCompacted | None:
    """`Agent.compact()`: compact now, between turns. The older rounds become a summary the model writes (on `focus`,
    if given), the latest stay verbatim. None if there was nothing to compact or a `PreCompact` hook said `deny`; the
    other events of it (the summary's usage, a hook's failure) go where background events go (`background_events()`).
    `RuntimeError` while a turn runs."""
    if owner.turns.running:
        raise RuntimeError("a turn is running: compact between turns")
    event = await compact(owner, owner.tree.background.emit, owner.model, trigger="manual", focus=focus)
    owner.conversation.save()
    return event


async def kernel_names(owner: TurnOwner) -> str | None:
    """What `%whos` shows in the agent's kernel (None: the agent has no kernel); clipped to `NAMES_CHARS`."""
    kernel = owner.parts.kernel
    if kernel is None:
        return None
    try:
        async with asyncio.timeout(NAMES_TIMEOUT + 5):
            result = await kernel.execute(WHOS, timeout=NAMES_TIMEOUT, store_history=False)
    except Exception as exc:  # a dead or stuck kernel: the summary goes on without its names
        return f"(the kernel's names could not be read: {type(exc).__name__}: {exc})"
    text = result.text.strip()
    if result.status != "ok":
        return f"(the kernel's names could not be read: {result.status}: {text[-300:]})"
    if len(text) > NAMES_CHARS:
        lines = text[:NAMES_CHARS].rsplit("\n", 1)[0]
        text = f"{lines}\n[… {text.count(chr(10)) - lines.count(chr(10))} more lines …]"
    return text


async def _summary_response(owner: TurnOwner, emit: Emit, model: Model, text: str) -> ModelResponse:
    """One request without tools that writes the summary; retried as a model round is, counted in the agent's usage
    (a `ModelUsage` event), its text never shown as the agent's answer."""
    from pydantic_ai.messages import ModelRequest, SystemPromptPart, UserPromptPart

    settings = owner.settings
    request = [ModelRequest(parts=[SystemPromptPart(SUMMARY_SYSTEM_PROMPT), UserPromptPart(text)])]

    def slots_only(event: AgentEvent) -> None:
        if isinstance(event, ModelSlot):
            emit(event)

    attempts, attempt = settings.model_retries + 1, 1
    while True:
        try:
            response = await send(model, request, [], settings.model_settings, agent_id=owner.agent_id,
                                  slots=owner.tree.model_requests, idle=settings.stream_idle_timeout,
                                  emit=slots_only, attempt=Attempt())
            break
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            asked = provider_wait(exc)
            if retry_reason(exc) is None or attempt >= attempts or (asked is not None and asked > retries.LONGEST_WAIT):
                raise ModelError(f"the summary request of a compaction failed: {type(exc).__name__}: {exc}") from exc
            owner.tree.usage.retried(owner.agent_id)
            await retries.sleep(backoff(attempt, settings.model_retry_backoff, asked))
            attempt += 1
    used = owner.tree.usage.record(owner.agent_id, response)
    emit(ModelUsage(agent_id=owner.agent_id, model_name=response.model_name or "", input_tokens=used.input_tokens,
                    output_tokens=used.output_tokens, cost=used.cost))
    return response
