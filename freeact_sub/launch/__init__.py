"""What the command-line front ends share to start an agent: the configuration flags, the working
folder's `.env`, the demo server, the `AgentConfig` built from flags, environment and `--config`, and the
modes a person switches between (`modes.py`: the terminal's `/mode`, ACP's `session/set_mode`).

The terminal (`freeact-sub`) and the ACP agent (`freeact-sub acp`) both stand on it, so the two are
configured the same way.
"""

from .flags import UsageError, add_config_flags, add_demo_flag, working_dir_from
from .run_config import build_config, load_dotenv, start_demo

__all__ = ["UsageError", "add_config_flags", "add_demo_flag", "build_config", "load_dotenv", "start_demo",
           "working_dir_from"]
