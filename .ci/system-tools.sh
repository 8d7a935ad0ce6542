# Sourced by .ci/run (and by tests/unit/test_ci_script.py): installs the system tools the tests use.
# System tools the tests use, each installed on its own and only when its command is missing:
#   chromium  the JupyterLab browser test (tests/e2e/test_jupyterlab.py)
#   node/npm  the tests with an MCP server from npm (@modelcontextprotocol/server-filesystem)
#   git, ssh-agent  the security suite (a git repository as working folder, a real ssh-agent to steal from)
# Each apt request is simulated first (`apt-get install -s`), so a package that conflicts with
# what is installed (Debian's npm beside NodeSource's nodejs, whose npm is bundled) is never
# asked for. A tool that cannot be installed is named, with what it skips, and the tests run on;
# FREEACT_SUB_MISSING_TOOLS tells the tests which tools were tried and are missing.
missing=()
apt_updated=0

install_tool() { # install_tool COMMAND PACKAGE WHAT-IT-IS-FOR
  local command=$1 package=$2 purpose=$3
  command -v "$command" >/dev/null 2>&1 && return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "ci: '$command' is missing and there is no apt-get: $purpose is skipped" >&2
    missing+=("$command")
    return 0
  fi
  if [ "$apt_updated" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq || echo "ci: apt-get update failed" >&2
    apt_updated=1
  fi
  local simulated
  if ! simulated=$(apt-get install -s "$package" 2>&1); then
    echo "ci: apt cannot install '$package' here ($(echo "$simulated" | tail -n 1)): $purpose is skipped" >&2
    missing+=("$command")
    return 0
  fi
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null \
      || ! command -v "$command" >/dev/null 2>&1; then
    echo "ci: installing '$package' failed: $purpose is skipped" >&2
    missing+=("$command")
  fi
}

install_tool chromium chromium "the JupyterLab browser test"
install_tool node nodejs "the npm MCP server tests"
install_tool npm npm "the npm MCP server tests"
install_tool git git "the security suite's git working folder"
install_tool ssh-agent openssh-client "the security suite's ssh-agent attack"
export FREEACT_SUB_MISSING_TOOLS="${missing[*]:-}"
