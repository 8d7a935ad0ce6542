"""Ask for the folder's trust in the cell where `await agent.start()` was refused for the lack of it.

`Agent.start()` raises a `ConfigError` when the working folder ships files with powers (agent types,
`AGENTS.md`, skills) that the person has not trusted; a program decides with `trust_project=`. In a
notebook the person is right there: `install()` sets an IPython handler for `ConfigError`, and when
the error came out of an `Agent.start()` whose agent still waits for trust, the cell shows the trust
question with its buttons instead of a traceback. Trusting remembers the folder (as the terminal and
`view.run` do); not trusting runs that agent without those files. Either way the next
`await agent.start()` (or `view.run`) starts it. Any other `ConfigError` shows its usual traceback.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from freeact_sub import Agent, ConfigError

from .trust_panel import TrustPanel

__all__ = ["install", "refused_agent"]

_installed: set[int] = set()
"""ids of the shells the handler is set on."""


def install() -> None:
    """Set the handler on the running IPython shell (once); nothing outside IPython, nor over another handler."""
    from IPython.core.getipython import get_ipython

    shell = get_ipython()
    if shell is None or id(shell) in _installed or shell.custom_exceptions:
        return
    _installed.add(id(shell))
    shell.set_custom_exc((ConfigError,), _handle)


def refused_agent(tb: TracebackType | None) -> Agent | None:
    """The agent whose `start()` raised, if the traceback passes through `Agent.start` and it waits for trust."""
    while tb is not None:
        if tb.tb_frame.f_code is Agent.start.__code__:
            agent = tb.tb_frame.f_locals.get("self")
            if isinstance(agent, Agent) and agent.untrusted_project() is not None:
                return agent
        tb = tb.tb_next
    return None


def ask(agent: Agent) -> TrustPanel:
    """The trust question for `agent`'s folder; a click remembers the trust or sets `trust_project = False`."""
    project = agent.untrusted_project()
    assert project is not None

    def decide(trusted: bool) -> None:
        again = "Run `await agent.start()` (or `view.run`) again:"
        if not trusted:
            agent.trust_project = False
            panel.settle(f"Not trusted. {again} the agent starts without {project.names()}.")
            return
        try:
            where = project.remember()
        except (OSError, ConfigError) as exc:
            agent.trust_project = True
            panel.settle(f"Trusted for this agent only (could not remember it: {exc}). {again} it starts now.")
            return
        panel.settle(f"Trusted, remembered in {where}. {again} it starts now.")

    panel = TrustPanel(project, on_decision=decide)
    return panel


def _handle(
    shell: Any, etype: type[BaseException], value: BaseException, tb: TracebackType | None, tb_offset: int | None = None
) -> None:
    agent = refused_agent(tb)
    if agent is None:
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        return
    from IPython.display import display

    display(ask(agent))
