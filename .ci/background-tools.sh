#!/usr/bin/env bash
# Run by .ci/run in the background: the system tools the tests use, then acpx. Writes the tools it could not get
# to FOLDER/missing (tests/ci_builds.py reads it). Usage: background-tools.sh FOLDER
set -uo pipefail
folder=$1

# System tools (Chromium, node, npm, git, ssh-agent), each only when missing: see system-tools.sh.
source .ci/system-tools.sh

# acpx, the headless ACP client tests/e2e/test_acpx.py drives, from npm into the project's .cache (never a global
# install): pinned to 0.1.15, which runs on Node.js 20 (its later releases need 22). Without it the test skips, saying so.
if ! { command -v npm >/dev/null 2>&1 \
    && npm install --no-audit --no-fund --prefix .cache/acpx "acpx@0.1.15" >/dev/null; }; then
  echo "CI: could not install acpx@0.1.15 from npm; the acpx test will skip" >&2
  FREEACT_SUB_MISSING_TOOLS="${FREEACT_SUB_MISSING_TOOLS:-} acpx"
fi

echo "$FREEACT_SUB_MISSING_TOOLS" > "$folder/missing"
