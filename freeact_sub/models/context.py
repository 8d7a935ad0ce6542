"""How full a model's context window is: the window's size, the next request's tokens, an overflow error.

The window comes from pydantic-ai's model profile (`Model.context_window`: the provider's own table
where it has one, else the `genai-prices` data pydantic-ai fills in), unless the person set
`AgentConfig.context_window` for the model (a local server, a proxy, a model neither knows).

The next request's size is measured where the provider measured it: the input plus output tokens
of the latest response whose request held this history (its usage), plus an estimate (four
characters a token) of what was added after it; never less than the estimate of the whole
history (a provider may count low, or not at all). A history with no such response (a new or
resumed one, or one just compacted) is estimated whole.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models import Model

__all__ = ["CHARS_PER_TOKEN", "SizeCache", "context_window", "estimate_tokens", "is_overflow", "message_chars"]

CHARS_PER_TOKEN = 4
"""The estimate of characters per token where no provider counted them (English prose and code average 3–4)."""
IMAGE_TOKENS = 1_500
"""What an image in the history is counted as (a ~1000×1000 picture costs Anthropic and OpenAI about this)."""


def context_window(model: Model, configured: int | None) -> tuple[int | None, str]:
    """The model's context window in tokens and where it came from: `config`, `profile` or `unknown`."""
    if configured is not None:
        return configured, "config"
    try:
        window = model.context_window
    except Exception:  # a model class that cannot resolve its profile (a test double): unknown
        window = None
    if isinstance(window, int) and window > 0:
        return window, "profile"
    return None, "unknown"


def message_chars(message: ModelMessage) -> int:
    """The characters one message puts into a request (text, tool arguments and results); an image counts as
    `IMAGE_TOKENS` tokens' worth."""
    total = 0
    for part in message.parts:
        content: Any = getattr(part, "content", None)
        if part.part_kind == "tool-call":
            args: Any = getattr(part, "args", None)
            total += len(args if isinstance(args, str) else json.dumps(args, default=str)) + 40
            continue
        items = content if isinstance(content, list) else [content]
        for item in items:
            if isinstance(item, str):
                total += len(item)
            elif item is None:
                continue
            elif getattr(item, "is_image", False) or type(item).__name__ in ("BinaryContent", "ImageUrl"):
                total += IMAGE_TOKENS * CHARS_PER_TOKEN
            else:
                total += len(json.dumps(item, default=str))
        total += 20  # the part's framing (role, ids)
    return total


SizeCache = dict[int, tuple[Any, Any, int, int]]
"""Per message, by `id`: the message itself (a reused id is not mistaken), the history's first message when it was
counted, its characters, and the characters of the history up to and with it. A history is estimated before every
round; it grows at its end and its messages are replaced, never changed, so each is counted once."""


def estimate_tokens(
    messages: Sequence[ModelMessage], *, measured_from: int = 0, extra_chars: int = 0, cache: SizeCache | None = None
) -> int:
    """The tokens a request of `messages` holds: the latest response at or after `measured_from` that reports
    usage, as the provider counted it, plus the estimate of every message after it; or the estimate of it all
    (with `extra_chars`, what the request adds besides its messages: tool definitions), whichever is larger.

    The larger, because a provider (or a test double, or a proxy) may count low or not at all, and an
    estimate alone may undercount code and non-English text. `cache` (one per history) makes a round's
    estimate cost the messages added since the last one.
    """
    cache = {} if cache is None else cache
    sizes = _Sizes(messages, cache)
    measured, after = 0, 0
    for index in range(len(messages) - 1, measured_from - 1, -1):
        message = messages[index]
        if message.kind == "response" and message.usage.input_tokens:
            measured = message.usage.input_tokens + (message.usage.output_tokens or 0) + -(-after // CHARS_PER_TOKEN)
            break
        after += sizes.of(index)
    return max(measured, -(-(sizes.total() + extra_chars) // CHARS_PER_TOKEN))


class _Sizes:
    def __init__(self, messages: Sequence[ModelMessage], cache: SizeCache) -> None:
        self.messages, self.cache = messages, cache
        self.root = messages[0] if messages else None

    def _known(self, index: int) -> tuple[Any, Any, int, int] | None:
        message = self.messages[index]
        known = self.cache.get(id(message))
        return known if known is not None and known[0] is message else None

    def of(self, index: int) -> int:
        known = self._known(index)
        return known[2] if known is not None else message_chars(self.messages[index])

    def total(self) -> int:
        """The characters of the whole history: from the last message whose running total is known, onwards."""
        messages, start, running = self.messages, 0, 0
        for index in range(len(messages) - 1, -1, -1):
            known = self._known(index)
            if known is not None and known[1] is self.root:
                start, running = index + 1, known[3]
                break
        for index in range(start, len(messages)):
            size = self.of(index)
            running += size
            self.cache[id(messages[index])] = (messages[index], self.root, size, running)
        if len(self.cache) > 2 * len(messages) + 64:  # drop what the history no longer holds
            keep = {id(m) for m in messages}
            for key in [k for k in self.cache if k not in keep]:
                del self.cache[key]
        return running


def is_overflow(exc: BaseException | None) -> bool:
    """Whether `exc` (or what caused it) is a provider saying the request exceeds the model's context window.

    pydantic-ai classifies both real shapes as `ModelContextWindowExceededError`: OpenAI's 400 with
    `code: context_length_exceeded` (or its "maximum context length" wording on compatible servers) and
    Anthropic's 400 `invalid_request_error` saying "prompt is too long".
    """
    from pydantic_ai.exceptions import ModelContextWindowExceededError

    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, ModelContextWindowExceededError):
            return True
        exc, seen = exc.__cause__, seen + 1
    return False
