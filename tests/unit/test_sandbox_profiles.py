"""Sandbox profiles on paper: names and tables, a child's profile under its parent's, and the plan's paths."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from freeact_sub import AgentConfig, AgentType
from freeact_sub.agent.tool_calls import sandbox_note
from freeact_sub.sandbox import BUILT_IN_PROFILES, SandboxProfile, meet, profile_from

WORKSPACE, OFFLINE, READ_ONLY, OFF = (BUILT_IN_PROFILES[name] for name in ("workspace", "offline", "read-only", "off"))


def test_a_profile_is_a_name_or_a_table_and_a_bad_one_names_the_field() -> None:
    assert AgentConfig(sandbox="read-only").sandbox is READ_ONLY
    custom = AgentConfig(sandbox={"write": [".", "/data"], "network": False}).sandbox
    assert custom is not None and custom.write == (".", "/data") and not custom.network
    assert custom.read_deny == WORKSPACE.read_deny  # the secrets stay denied unless the table says otherwise
    with pytest.raises(ValidationError, match=r"unknown sandbox profile 'strict'.*workspace, offline, read-only, off"):
        AgentConfig(sandbox="strict")
    with pytest.raises(ValidationError, match=r"sandbox\.network"):
        AgentConfig(sandbox={"network": "sometimes"})
    with pytest.raises(ValidationError, match=r"sandbox\.writes"):
        AgentConfig(sandbox={"writes": ["."]})
    assert AgentType(description="d", sandbox="offline").sandbox is OFFLINE


def test_a_child_gets_what_its_type_asks_for_but_never_more_than_its_parent(tmp_path: Path) -> None:
    assert meet(WORKSPACE, READ_ONLY, tmp_path) is READ_ONLY
    assert meet(OFFLINE, WORKSPACE, tmp_path) is OFFLINE
    assert meet(WORKSPACE, OFF, tmp_path) is WORKSPACE  # asking for no sandbox under one keeps the parent's
    assert meet(OFF, READ_ONLY, tmp_path) is READ_ONLY
    # more writes and the network than an offline parent has, and one more denied path
    asks = SandboxProfile(name="wide", write=(".", "/srv"), read_deny=("secret.txt",), network=True)
    combined = meet(OFFLINE, asks, tmp_path)
    assert combined.write == (".",) and not combined.network
    assert set(combined.read_deny) == {*OFFLINE.read_deny, "secret.txt"}
    assert combined.name == "wide within offline"
    # a narrower folder of the child's inside the parent's working folder stays narrow
    narrow = meet(WORKSPACE, SandboxProfile(name="out", write=("out",)), tmp_path)
    assert narrow.write == ("out",) and narrow.network


def test_the_plan_names_existing_secrets_in_the_home_and_below_the_working_folder(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".ssh").mkdir(parents=True)
    (work / "app" / "node_modules" / "pkg").mkdir(parents=True)
    (work / ".env").write_text("A=1")
    (work / "app" / ".env").write_text("B=2")
    (work / "app" / "node_modules" / "pkg" / ".env").write_text("C=3")  # package folders are not searched
    plan = WORKSPACE.plan(work, homes=[str(home)])
    assert str(home / ".ssh") in plan["deny"] and str(home / ".aws") not in plan["deny"]  # only what exists
    assert str(work / ".env") in plan["deny"] and str(work / "app" / ".env") in plan["deny"]
    assert not any("node_modules" in path for path in plan["deny"])
    assert plan["write"] == [str(work)] and plan["network"] == ["*"]  # the public internet, through the proxy
    assert READ_ONLY.plan(work, homes=[str(home)])["write"] == []


def test_the_note_on_a_refusal_names_the_profile_and_only_comes_with_a_sandbox() -> None:
    error = "PermissionError: [Errno 13] Permission denied: '/home/me/.ssh/id_rsa'"
    note = sandbox_note(error, OFFLINE)
    assert note is not None and "offline" in note and "no network" in note and "ask the user" in note
    assert sandbox_note(error, OFF) is None and sandbox_note(error, None) is None
    assert sandbox_note("all fine", WORKSPACE) is None
    assert sandbox_note("OSError: [Errno 101] Network is unreachable", OFFLINE) is not None


def test_describe_says_what_a_person_needs_to_know() -> None:
    limits = WORKSPACE.limits.describe()
    assert limits.startswith("memory ") and limits.endswith(", 256 processes")
    assert WORKSPACE.describe() == f"workspace (writes: working folder; network; {limits})"
    assert READ_ONLY.describe() == f"read-only (writes: its temp folder only; no network; {limits})"
    assert BUILT_IN_PROFILES["packages"].describe().startswith(
        "packages (writes: working folder; hosts: pypi.org, files.pythonhosted.org; memory ")
    assert OFF.describe().startswith("off")
    assert profile_from(WORKSPACE) is WORKSPACE


def test_the_walk_enters_hidden_folders_but_not_links_or_environments(tmp_path: Path) -> None:
    home, work, outside = tmp_path / "home", tmp_path / "work", tmp_path / "outside"
    home.mkdir()
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / ".env").write_text("X=1")
    (work / ".devcontainer").mkdir(parents=True)
    (work / ".devcontainer" / ".env").write_text("A=1")  # a hidden folder is searched
    (work / "linked").symlink_to(outside)  # a link is never entered
    (work / "venv" / "lib").mkdir(parents=True)
    (work / "venv" / "pyvenv.cfg").write_text("home = /usr/bin")
    (work / "venv" / "lib" / ".env").write_text("B=2")  # an environment is kept whole, not searched
    plan = WORKSPACE.plan(work, homes=[str(home)])
    assert str(work / ".devcontainer" / ".env") in plan["deny"]
    assert str(outside / "deep" / ".env") not in plan["deny"]
    assert str(work / "venv" / "lib" / ".env") not in plan["deny"]
    assert str(work / "venv") in plan["read_only"]
