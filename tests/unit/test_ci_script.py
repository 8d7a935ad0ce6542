"""`.ci/run` installs each missing system tool on its own and never asks apt for a conflicting package.

A fresh CI machine has NodeSource's nodejs with a bundled npm and no Chromium; asking apt for
`chromium nodejs npm` at once failed there (Debian's npm conflicts with that nodejs) and ended
the run before any test. These tests run the real install script against a recording `apt-get`
on a PATH the test controls, and simulate the real apt where it exists.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.ci_builds import wait_for_system_tools

ROOT = Path(__file__).resolve().parents[2]
CI_RUN = ROOT / ".ci" / "run"
SYSTEM_TOOLS = ROOT / ".ci" / "system-tools.sh"
BACKGROUND_TOOLS = ROOT / ".ci" / "background-tools.sh"
README = ROOT / "README.md"

FAKE_APT = r"""#!/bin/bash
echo "$*" >> "$APT_LOG"
if [ "$1" = install ] && [ "$2" = -s ]; then
  case " $FAKE_APT_CONFLICTS " in
    *" $3 "*) echo " nodejs : Conflicts: $3"; echo "E: Unable to correct problems."; exit 100;;
  esac
  exit 0
fi
if [ "$1" = install ]; then
  package="${@: -1}"
  # installing a package puts its command on PATH (Debian's nodejs installs `node`, openssh-client `ssh-agent`)
  command=$package; [ "$package" = nodejs ] && command=node; [ "$package" = openssh-client ] && command=ssh-agent
  printf '#!/bin/sh\n' > "$FAKE_BIN/$command"; chmod +x "$FAKE_BIN/$command"
fi
exit 0
"""


def installs() -> list[tuple[str, str]]:
    """(command, package) of every `install_tool` line of the script."""
    return re.findall(r"^install_tool (\S+) (\S+) ", SYSTEM_TOOLS.read_text(), flags=re.MULTILINE)


def run_install_step(tmp_path: Path, present: list[str], conflicts: str = "") -> tuple[list[str], str, str]:
    """Source the install step with only `present` (and the shell's basics) on PATH: apt's calls, missing, stderr."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    for basic in ("tail", "cat", "chmod"):
        os.symlink(shutil.which(basic) or f"/bin/{basic}", fake_bin / basic)
    for command in present:
        (fake_bin / command).write_text("#!/bin/sh\n")
        (fake_bin / command).chmod(0o755)
    (fake_bin / "apt-get").write_text(FAKE_APT)
    (fake_bin / "apt-get").chmod(0o755)
    log = tmp_path / "apt.log"
    log.touch()
    env = {"PATH": str(fake_bin), "APT_LOG": str(log), "FAKE_BIN": str(fake_bin), "FAKE_APT_CONFLICTS": conflicts}
    script = f'source {SYSTEM_TOOLS}; echo "missing=$FREEACT_SUB_MISSING_TOOLS"'
    done = subprocess.run(
        [shutil.which("bash") or "/bin/bash", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return log.read_text().splitlines(), done.stdout.strip(), done.stderr


def test_every_apt_request_names_one_package_and_is_guarded_by_its_command() -> None:
    script = "\n".join(line for line in SYSTEM_TOOLS.read_text().splitlines() if not line.lstrip().startswith("#"))
    run = "\n".join(
        line
        for path in (CI_RUN, BACKGROUND_TOOLS)
        for line in path.read_text().splitlines()
        if not line.lstrip().startswith("#")
    )
    assert "bash .ci/background-tools.sh" in CI_RUN.read_text()
    assert "source .ci/system-tools.sh" in run
    # apt is asked in one place only, for the one package of one install_tool call, after a command check
    assert re.findall(r"apt-get install[^\n]*", script) == [
        'apt-get install -s "$package" 2>&1); then',
        'apt-get install -y -qq "$package" >/dev/null \\',
    ]
    assert "apt-get install" not in run
    body = script[script.index("install_tool() {") : script.index("\n}\n")]
    assert body.index('command -v "$command"') < body.index("apt-get install -s")
    assert body.index("apt-get install -s") < body.index("apt-get install -y")
    assert sorted(installs()) == [
        ("chromium", "chromium"), ("git", "git"), ("node", "nodejs"), ("npm", "npm"), ("ssh-agent", "openssh-client")
    ]


def test_a_machine_with_node_and_bundled_npm_asks_apt_for_chromium_alone(tmp_path: Path) -> None:
    calls, missing, _ = run_install_step(tmp_path, present=["node", "npm", "git", "ssh-agent"], conflicts="npm")
    assert [call for call in calls if call.startswith("install")] == ["install -s chromium", "install -y -qq chromium"]
    assert missing == "missing="


def test_a_machine_with_everything_asks_apt_nothing(tmp_path: Path) -> None:
    calls, missing, _ = run_install_step(tmp_path, present=["chromium", "node", "npm", "git", "ssh-agent"])
    assert calls == []
    assert missing == "missing="


def test_a_conflicting_package_is_skipped_with_a_reason_and_the_run_goes_on(tmp_path: Path) -> None:
    # node without npm, and apt's npm conflicts with that node: npm is named missing, never installed
    calls, missing, stderr = run_install_step(tmp_path, present=["chromium", "node", "git", "ssh-agent"],
                                              conflicts="npm")
    assert "install -s npm" in calls
    assert not any(call.startswith("install -y") for call in calls)
    assert missing == "missing=npm"
    assert "apt cannot install 'npm'" in stderr and "the npm MCP server tests is skipped" in stderr


def test_a_bare_machine_gets_each_tool_by_its_own_request(tmp_path: Path) -> None:
    calls, missing, _ = run_install_step(tmp_path, present=[])
    assert [call for call in calls if call.startswith("install -y")] == [
        "install -y -qq chromium",
        "install -y -qq nodejs",
        "install -y -qq npm",
        "install -y -qq git",
        "install -y -qq openssh-client",
    ]
    assert calls.count("update -qq") == 1
    assert missing == "missing="


@pytest.mark.skipif(shutil.which("apt-get") is None, reason="no apt on this machine")
def test_what_the_script_would_ask_of_this_machines_apt_is_installable() -> None:
    """The real apt, in simulation, for each package whose command is missing here (what CI would request)."""
    wait_for_system_tools()  # in CI, apt is at work in the background (.ci/background-tools.sh): its lists change
    wanted = [package for command, package in installs() if shutil.which(command) is None]
    if not wanted:
        pytest.skip("every tool is installed here: .ci/run asks apt for nothing")
    for package in wanted:
        policy = subprocess.run(["apt-cache", "policy", package], capture_output=True, text=True, timeout=60)
        if "Candidate:" not in policy.stdout or "Candidate: (none)" in policy.stdout:
            pytest.skip(f"apt has no package lists for {package} yet (run apt-get update)")
        simulated = subprocess.run(["apt-get", "install", "-s", package], capture_output=True, text=True, timeout=120)
        assert simulated.returncode == 0, f"apt-get install -s {package}:\n{simulated.stdout}{simulated.stderr}"


def test_the_readme_test_line_is_what_ci_runs() -> None:
    test_line = CI_RUN.read_text().strip().splitlines()[-1]
    assert test_line in README.read_text()


def test_the_background_install_reports_what_it_could_not_get(tmp_path: Path) -> None:
    """`.ci/background-tools.sh` runs the same install step, then acpx, and writes the tools it lacks to a file."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    for basic in ("tail", "cat", "chmod"):
        os.symlink(shutil.which(basic) or f"/bin/{basic}", fake_bin / basic)
    for command in ("chromium", "node", "git", "ssh-agent"):  # no npm, and apt's npm conflicts: npm and acpx missing
        (fake_bin / command).write_text("#!/bin/sh\n")
        (fake_bin / command).chmod(0o755)
    (fake_bin / "apt-get").write_text(FAKE_APT)
    (fake_bin / "apt-get").chmod(0o755)
    (tmp_path / "apt.log").touch()
    report = tmp_path / "tools"
    report.mkdir()
    env = {"PATH": str(fake_bin), "APT_LOG": str(tmp_path / "apt.log"), "FAKE_BIN": str(fake_bin),
           "FAKE_APT_CONFLICTS": "npm"}
    done = subprocess.run([shutil.which("bash") or "/bin/bash", str(BACKGROUND_TOOLS), str(report)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert (report / "missing").read_text().split() == ["npm", "acpx"]
    assert "could not install acpx" in done.stderr
