"""The subagents' scripts, chosen by their prompt (see `scenario.py`): review, primes, π, background, anything."""

from __future__ import annotations

import json
import re

from .replies import Conversation, Reply, ToolCall, cell, rejection, result_value
from .tasks import REVIEW_SUMMARY

__all__ = ["subagent_reply"]


_PRIMES_CELL = """\
import time
limit = 200_000
sieve = bytearray([1]) * limit
sieve[0:2] = b"\\x00\\x00"
for n in range(2, int(limit ** 0.5) + 1):
    if sieve[n]:
        sieve[n * n :: n] = bytes(len(range(n * n, limit, n)))
for part in range(1, 4):
    print(f"checking part {part} of 3 ...", flush=True)
    time.sleep(0.4)
print(f"RESULT: {sum(sieve)}")"""

_PI_CELL = """\
import random, time
random.seed(7)
points, inside = 400_000, 0
for batch in range(4):
    for _ in range(points // 4):
        x, y = random.random(), random.random()
        inside += x * x + y * y <= 1.0
    print(f"batch {batch + 1} of 4 done", flush=True)
    time.sleep(0.2)
print(f"RESULT: {4 * inside / points:.5f}")"""


def _primes_subagent(c: Conversation) -> Reply:
    if c.step == 0:
        return Reply(
            reasoning="A sieve of Eratosthenes up to 200,000 is quick in pure Python.",
            text="Sieving the numbers below 200,000.",
            tool_calls=(cell(_PRIMES_CELL),),
        )
    value = result_value(c.results[-1]) if c.results else None
    if value is None:
        return Reply(text="The sieve did not print a count.")
    return Reply(reasoning="The sieve printed the count.", text=f"There are {value} primes below 200,000.")


def _pi_subagent(c: Conversation) -> Reply:
    if c.step == 0:
        constant = c.tool_ending("_constant")
        if constant is not None:
            return Reply(
                reasoning="First the reference value of pi from the demo MCP server.",
                text="Asking the demo MCP server for the reference value of π.",
                tool_calls=(ToolCall(constant, {"name": "pi"}),),
            )
    reference = _reference(c.results)
    if c.step <= 1 and not any(result_value(r) for r in c.results):
        return Reply(
            reasoning="Now the simulation: 400,000 random points in the unit square.",
            text="Running the Monte Carlo simulation.",
            tool_calls=(cell(_PI_CELL),),
        )
    value = next((v for r in reversed(c.results) if (v := result_value(r))), None)
    if value is None:
        return Reply(text="The simulation did not print an estimate.")
    if reference is None:
        return Reply(text=f"π ≈ {value} (no reference value to compare with).")
    error = abs(float(value) - reference)
    return Reply(
        reasoning="Compare the estimate with the reference value.",
        text=f"π ≈ {value}, off by {error:.5f} from the reference {reference:.5f}.",
    )


def _reviewer_subagent(c: Conversation) -> Reply:
    summary = REVIEW_SUMMARY if REVIEW_SUMMARY in c.prompt else c.prompt
    word_count = c.tool_ending("_word_count")
    if c.step == 0 and word_count is not None:
        return Reply(
            reasoning="A summary for a newcomer should be short. I'll count its words with the word_count tool.",
            text="Counting the summary's words.",
            tool_calls=(ToolCall(word_count, {"text": summary}),),
        )
    counted = re.search(r"\d+", c.results[-1]) if c.results else None
    words = int(counted.group(0)) if counted else len(summary.split())
    verdict = "short enough" if words <= 20 else "too long"
    return Reply(
        reasoning="I have the count; now a one-sentence verdict.",
        text=f"The summary has {words} words: {verdict}, and it names kernels, parallel helpers and approvals.",
    )


def _reference(results: list[str]) -> float | None:
    for text in results:
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = text
        candidate = data.get("value") if isinstance(data, dict) else data
        try:
            return float(str(candidate).strip())
        except ValueError:
            continue
    return None


def _background_subagent(c: Conversation) -> Reply:
    if c.step == 0:
        return Reply(
            reasoning=(
                "I run in the background, so nobody waits for me and I can take my time. The job is small: "
                "split the sentence on whitespace and count the parts. One short cell prints the count, then "
                "I answer with it. My parent is told when I end, at its next model request."
            ),
            text="Counting the words.",
            tool_calls=(cell(f"sentence = {_quoted_sentence(c.prompt)!r}\n"
                              "print(f'RESULT: {len(sentence.split())}')"),),
        )
    value = result_value(c.results[-1]) if c.results else None
    return Reply(text=f"The sentence has {value} words." if value else "The cell did not print a count.")


def _quoted_sentence(prompt: str) -> str:
    match = re.search(r"'([^']*)'", prompt)
    return match.group(1) if match else prompt


def _generic_subagent(c: Conversation) -> Reply:
    if c.step == 0:
        return Reply(
            reasoning="A generic job; a short cell shows I can run code.",
            text="Running a short cell.",
            tool_calls=(cell(f"print('RESULT: ' + str(len({c.prompt[:200]!r})))"),),
        )
    value = result_value(c.results[-1]) if c.results else None
    return Reply(text=f"Done: the prompt had {value} characters.")


def _letters_subagent(c: Conversation) -> Reply:
    """A row of the `per row` script: answers with the JSON object the cell asked for."""
    word = re.search(r"the word '([^']*)'", c.prompt)
    text = word.group(1) if word else ""
    return Reply(reasoning=f"The word {text!r} has {len(text)} letters.",
                 text=json.dumps({"word": text, "letters": len(text)}))


def subagent_reply(conversation: Conversation) -> Reply:
    """A subagent's next reply: a stop after a rejection, an answer to a message, else the script its prompt names."""
    prompt = conversation.prompt.lower()
    refused = rejection(conversation)
    if refused is not None:
        return Reply(reasoning="The user rejected my call and said why.", text=f"I stopped: {refused}")
    if prompt.startswith("[a message from") and conversation.step == 0:
        message = conversation.prompt.partition("\n")[2].strip()
        return Reply(reasoning="A message came while I worked; I take it into account and finish.",
                     text=f"I read your message ({message!r}) and finish here.")
    chosen = (
        ("count the letters of the word" in prompt, _letters_subagent),
        ("review" in prompt, _reviewer_subagent),
        ("pi" in re.findall(r"[a-z]+", prompt), _pi_subagent),
        ("prime" in prompt, _primes_subagent),
        ("background" in prompt, _background_subagent),
    )
    script = next((script for named, script in chosen if named), _generic_subagent)
    return script(conversation)
