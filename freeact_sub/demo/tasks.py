"""The demo's names and jobs: the model names it answers to and the prompts of the jobs its main agent hands out."""

from __future__ import annotations

__all__ = [
    "BACKGROUND_TASK",
    "DEMO_ANTHROPIC_MODEL",
    "DEMO_MODEL",
    "PI_TASK",
    "PRIMES_TASK",
    "REVIEW_SUMMARY",
    "REVIEW_TASK",
]

DEMO_MODEL = "freeact-sub-demo"
"""The model name the demo server answers to (any name works; this one is shown in banners)."""
DEMO_ANTHROPIC_MODEL = "claude-demo"
"""The model name of the demo's `reviewer` type, sent over the Anthropic Messages protocol."""

PRIMES_TASK = (
    "Count the prime numbers below 200,000 with a simple sieve of Eratosthenes in Python. "
    "Print the count on a line of its own as `RESULT: <count>` and answer with the count."
)
PI_TASK = (
    "Estimate pi with a Monte Carlo simulation of 400,000 random points (seed 7). First ask the "
    "demo MCP server's `constant` tool for the reference value of pi, then print the estimate as "
    "`RESULT: <estimate>` and answer with the estimate and its error against the reference."
)
REVIEW_SUMMARY = "Code runs in kernels, helpers work in parallel, and every action waits for your approval."
"""The one-line summary the tour's reviewer checks."""
REVIEW_TASK = (
    f"Review this one-line summary for a newcomer: \"{REVIEW_SUMMARY}\" Count its words with the demo "
    "MCP server's word_count tool and say in one sentence whether it is short enough (at most 20 words)."
)

BACKGROUND_TASK = (
    "As a background job, count the words of the sentence 'a background subagent works on while the "
    "conversation goes on'. Print the count as `RESULT: <count>` and answer with it."
)
