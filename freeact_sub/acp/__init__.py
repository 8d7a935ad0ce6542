"""`freeact-sub acp`: the agent over the Agent Client Protocol (stdio), for Zed, JetBrains, Neovim and
Jupyter AI's chat; and the Jupyter AI persona that starts it (`persona.py`, with the `jupyter-ai` extra).

`main.py` serves the protocol; `server.py` answers its requests, one `session.py` per session; `updates.py`
and `tool_calls.py` turn the agent's events into session updates, `permissions.py` its approvals into
permission requests.
"""
