"""Standing approval decisions, shared by an agent tree, and allow / ask / deny rules by tool pattern.

A rule decides before anyone is asked: `deny` is final (a standing `always` does not override
it), `allow` runs the call, `ask` (the default) leaves it to standing decisions and then to a person.
"""

from __future__ import annotations

import contextlib
import fnmatch
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["ApprovalPolicy", "ApprovalRules", "Rule", "RuleMatch", "specificity"]


class ApprovalPolicy:
    """Which agents are approved without asking.

    One policy is shared by a main agent and every subagent it starts, so a consumer can say
    "approve everything from agent-3fa2 from now on" for a child it has only just seen.
    Actions approved this way are still emitted, as `ApprovalRequest`s that are already decided.
    """

    def __init__(self, *, approve_everything: bool = False) -> None:
        self._agents: set[str] = set()
        self._everything = approve_everything
        self._listeners: list[Callable[[], None]] = []
        self._asking: dict[str, int] = {}
        """Questions each agent waits on now (a person has not answered yet)."""

    @contextlib.contextmanager
    def asking(self, agent_id: str) -> Iterator[None]:
        """While the block runs, `agent_id` waits for a person's answer (shown as `waiting for approval`)."""
        self._asking[agent_id] = self._asking.get(agent_id, 0) + 1
        try:
            yield
        finally:
            left = self._asking.pop(agent_id) - 1
            if left:
                self._asking[agent_id] = left

    def waits(self, agent_id: str) -> bool:
        """Whether `agent_id` waits for a person to answer one of its questions."""
        return agent_id in self._asking

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener()` after every change of a standing decision; returns a function that unsubscribes.

        Lets every view of the agents (each run's panels in a notebook) show the policy as it is,
        whoever changed it.
        """
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def _changed(self) -> None:
        for listener in list(self._listeners):
            listener()

    def always(self, agent_id: str) -> None:
        """Approve every action of `agent_id` from now on."""
        self._agents.add(agent_id)
        self._changed()

    def clear(self, agent_id: str) -> None:
        """Ask again for each action of `agent_id`."""
        self._agents.discard(agent_id)
        self._changed()

    def always_all(self) -> None:
        """Approve every action of every agent from now on."""
        self._everything = True
        self._changed()

    def clear_all(self) -> None:
        """Forget every standing decision: ask for each action again."""
        self._everything = False
        self._agents.clear()
        self._changed()

    @property
    def everything(self) -> bool:
        """Whether every agent is approved."""
        return self._everything

    @property
    def agent_ids(self) -> frozenset[str]:
        """The agents approved one by one."""
        return frozenset(self._agents)

    def is_approved(self, agent_id: str) -> bool:
        """Whether an action of `agent_id` runs without asking."""
        return self._everything or agent_id in self._agents


Rule = Literal["allow", "ask", "deny"]

_STRICTNESS: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}


@dataclass(frozen=True)
class RuleMatch:
    """The rule that decides a tool call."""

    rule: Rule
    pattern: str
    source: str
    """Where the rule is written: `agent type reviewer` or `approvals` (the global rules)."""

    def __str__(self) -> str:
        return f"{self.pattern!r}: {self.rule} ({self.source})"


def specificity(pattern: str) -> tuple[int, int]:
    """How specific a pattern is: an exact name beats any glob; then more literal characters win."""
    wildcards = sum(pattern.count(c) for c in "*?[")
    literal = len(pattern) - wildcards
    return (1 if wildcards == 0 else 0, literal)


class ApprovalRules:
    """Allow / ask / deny rules by tool pattern, in layers; the strictest layer's rule decides.

    Layers, top first: an agent's type's rules, then (for a subagent) its ancestors' types' rules, then the
    global `AgentConfig.approvals`. Within a layer the most specific matching pattern decides: an exact tool
    name before any glob, then the pattern with more literal characters; on a tie the stricter rule
    (`deny` > `ask` > `allow`). Across layers a `deny` in any layer is final, and an `ask` in any layer beats
    an `allow` in another: a type never gets more than the rules above and below it allow (a child's
    `'*': allow` does not lift its parent's or the person's `deny` or `ask`). The first layer with the
    strictest rule is the one reported. No matching rule in any layer means `ask`.
    """

    def __init__(self, layers: list[tuple[str, Mapping[str, Rule]]] | None = None) -> None:
        self.layers = [(source, dict(rules)) for source, rules in (layers or []) if rules]

    def under(self, source: str, rules: Mapping[str, Rule]) -> ApprovalRules:
        """These rules with `rules` (from `source`) as the top layer."""
        return ApprovalRules([(source, rules), *self.layers])

    def match(self, tool_name: str) -> RuleMatch | None:
        """The rule that decides `tool_name`, or None (ask)."""
        decided: RuleMatch | None = None
        for source, rules in self.layers:
            found = [(p, r) for p, r in rules.items() if fnmatch.fnmatchcase(tool_name, p)]
            if not found:
                continue
            pattern, rule = max(found, key=lambda pr: (specificity(pr[0]), _STRICTNESS[pr[1]]))
            if decided is None or _STRICTNESS[rule] > _STRICTNESS[decided.rule]:
                decided = RuleMatch(rule, pattern, source)
        return decided
