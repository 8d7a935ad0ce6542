"""`python run_confined.py PLAN_JSON -- COMMAND ARGS...`: confine this process to the plan, then become COMMAND.

Run by its path (the standard library alone, like `enforce.py`, which it loads from beside itself): a launched
kernel or a confined MCP server starts behind it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile


def main(argv: list[str]) -> None:
    """Apply the plan (`enforce.apply`), seal it (`enforce.seal`), then `exec` the command."""
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("usage: run_confined.py PLAN_JSON -- COMMAND [ARGS...]")
    spec = importlib.util.spec_from_file_location(
        "_freeact_sub_enforce", os.path.join(os.path.dirname(os.path.abspath(__file__)), "enforce.py")
    )
    assert spec is not None and spec.loader is not None
    enforce = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(enforce)
    plan = json.loads(argv[0])
    if not plan.get("scratch"):
        plan["scratch"] = tempfile.mkdtemp(prefix="freeact-sub-sandbox-")
        plan["remove_scratch"] = True
    try:
        enforce.apply(plan)
        enforce.seal(plan)
    except OSError as exc:
        sys.exit(f"freeact-sub sandbox: {exc}")
    os.execvp(argv[2], argv[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
