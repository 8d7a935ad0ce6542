"""Watch and approve agents in JupyterLab with ipywidgets.

    from freeact_sub.notebook import AgentView

    view = AgentView(agent)
    await view.run("...")        # or: task = view.start("...") to get the cell back at once

Kept out of `freeact_sub` itself so that importing the core never imports ipywidgets. Importing it in a
notebook also makes a refused `await agent.start()` (a folder whose files wait for your trust) ask for that
trust in its cell, with buttons, instead of showing a traceback.
Importing it also guards the notebook's imports (`freeact_sub.guard_imports()`): a module an agent's kernel wrote in
this folder is refused (`UntrustedModuleError`) until you trust it (`freeact_sub.trust_module(path)`).
Needs `ipykernel>=7.4` in the notebook's kernel: older kernels hold a button click until the
running cell ends, so an approval could never arrive.
"""

from freeact_sub import guard_imports

from . import _trust_on_start
from .agent_panel import AgentPanel
from .approval_panel import ApprovalPanel
from .call_view import CallView
from .rewind_panel import RewindPanel
from .run_panel import RunPanel
from .trust_panel import TrustPanel
from .view import AgentView

__all__ = ["AgentPanel", "AgentView", "ApprovalPanel", "CallView", "RewindPanel", "RunPanel", "TrustPanel"]

_trust_on_start.install()
guard_imports()
