"""The fan-out's scripted OpenAI-protocol provider in a process of its own, as a real provider is.

    python bench/servers/scripted_provider.py CELL_SECONDS

Prints its base URL on one line once it listens, and serves `bench/retry_bench.py`'s fan-out script (a parent
that starts N children, each of which runs one cell of CELL_SECONDS) until its stdin closes.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from bench.retry_bench import _responder
from freeact_sub.demo import DemoServer


def main(cell: float) -> None:
    with DemoServer(responder=_responder(cell), chunk_delay=0.001).start() as server:
        print(server.base_url_for("openai"), flush=True)
        sys.stdin.read()  # until the bench closes it (or ends)


if __name__ == "__main__":
    main(float(sys.argv[1]))
