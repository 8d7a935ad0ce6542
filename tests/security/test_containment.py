"""Attacks from inside real kernels, under every profile: each must work under `off` and fail under the others.

One agent tree per profile runs the same attack cell twice: in the main agent's kernel (launched) and in a
subagent's (forked by the zygote, from the pool), which then has its kernel restarted. The module runs
the trees once; each test below reads what one class of attack got (see `tests/security/lab.py`).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from freeact_sub import Agent, AgentConfig, CodeExecutionOutput, ConfigError
from freeact_sub.config.prompt_files import load_prompt_files
from freeact_sub.config.type_files import project_agent_types
from freeact_sub.sandbox import platform_problem
from freeact_sub.sandbox.kernel_folders import private_root
from tests.scripting import Call, Router, Script, drive, of
from tests.security.lab import ATTACKS, BASHRC, HOST_KEY, PNG, SECRET, Lab, build, working_folder

pytestmark = pytest.mark.skipif(platform_problem() is not None, reason=f"no sandbox here: {platform_problem()}")

ENFORCED = ("workspace", "offline", "read-only")
PROFILES = ("off", *ENFORCED)
KINDS = ("main", "child")
LOG_TARGET = "log-target.txt"


def _parameters(lab: Lab, work: Path, abstract: str) -> dict[str, Any]:
    return {
        "private_root": private_root(), "markers": str(lab.markers), "work": str(work), "home": str(lab.home),
        "outside": str(lab.outside), "ssh_socket": str(lab.ssh_socket), "docker_socket": str(lab.docker_socket),
        "abstract": abstract, "host_pid": os.getpid(), "host_key": HOST_KEY, "host_tty": lab.host_tty,
        "host_tty_fd": lab.host_tty_fd, "png": PNG,
        "key_holder_pid": lab.key_holder.pid if lab.key_holder is not None else 0,
        "runtime_file": str(lab.home / ".local/share/jupyter/runtime/kernel-notebook.json"),
    }


async def _attack(lab: Lab, profile: str, abstract: str) -> dict[str, Any]:
    work = working_folder(lab.root / f"work-{profile}")
    parameters = _parameters(lab, work, abstract)
    code = {kind: ATTACKS.format(lab=parameters, kind=f"{kind}-{profile}") for kind in KINDS}
    # the child's log is swapped for a link to this file, then its kernel restarts: the host must not follow it
    code["child"] = code["child"].replace('os.path.join(lab["home"], ".bashrc"), log)',
                                          f'os.path.join(lab["home"], {LOG_TARGET!r}), log)')
    router = Router({
        "MAIN": Script([Call("execute_ipython_cell", {"code": code["main"]}, id="m1")],
                       [Call("task", {"prompt": "CHILD attack"}, id="t1")], ["main done"]),
        "CHILD": Script([Call("execute_ipython_cell", {"code": code["child"]}, id="c1")],
                        [Call("reset_kernel", {}, id="c2")],
                        [Call("execute_ipython_cell", {"code": "print('alive after reset')"}, id="c3")],
                        ["child done"]),
    })
    config = AgentConfig(model=router.model, working_dir=work, auto_approve=True, sandbox=profile,
                         kernel_env={"HOME": str(lab.home)}, kernel_pool_size=1, execution_timeout=60,
                         save_sessions=profile != "off")  # `off` moves .freeact-sub away (sessions with it)
    before = project_agent_types(work).digest
    async with Agent(config, trust_project=True) as agent:  # the person trusts the project's own AGENTS.md, skills
        events = await drive(agent.stream("MAIN attack"))
        main_id = agent.agent_id
    outputs = of(CodeExecutionOutput, events)
    found: dict[str, Any] = {"work": work, "texts": {}, "digest_before": before}
    try:  # what the host reads for the next run (under `off`, the attack's own type file does not parse)
        project = project_agent_types(work)
        found["digest_after"], found["prompt_files"] = project.digest, load_prompt_files(project, applied=True)
    except ConfigError as exc:
        found["digest_after"], found["prompt_files"] = str(exc), None
    for output in outputs:
        kind = "main" if output.agent_id == main_id else "child"
        found["texts"].setdefault(kind, "")
        found["texts"][kind] += output.content
        for line in output.content.splitlines():
            if line.startswith("ATTACKS"):
                found[kind] = json.loads(line.removeprefix("ATTACKS"))
    return found


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def attacked(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Lab, dict[str, dict[str, Any]]]]:
    lab = build(tmp_path_factory.mktemp("lab"))
    (lab.home / LOG_TARGET).write_text(BASHRC)
    abstract = f"freeact-sub-test-{os.getpid()}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + abstract)
    listener.listen()
    before = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = HOST_KEY  # the host holds a provider key; no kernel may
    # The lab's kernels get a private root of their own: under `off` the attack drives every kernel it finds,
    # and the kernels of tests running beside this module (same user, same /tmp) are not the lab's to drive.
    temp_before = tempfile.tempdir
    tempfile.tempdir = str(lab.root / "tmp")
    os.mkdir(tempfile.tempdir)
    try:
        yield lab, {profile: await _attack(lab, profile, abstract) for profile in PROFILES}
    finally:
        tempfile.tempdir = temp_before
        if before is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = before
        listener.close()
        lab.close()


def _refused(value: str, *errnos: int) -> bool:
    return value in {f"errno {number}" for number in (errnos or (13,))}


async def test_no_kernel_reaches_another_kernel_or_the_notebooks_own(attacked) -> None:
    lab, results = attacked
    off = results["off"]["child"]
    assert off["other_kernels"].startswith("found ") and not off["other_kernels"].endswith(" ran 0"), off
    assert SECRET in off["notebook_runtime"]
    for profile in ENFORCED:
        for kind in KINDS:
            attack = results[profile][kind]
            assert attack["other_kernels"] == "found 0 ran 0", (profile, kind, attack)
            assert _refused(attack["notebook_runtime"]), (profile, kind)
    driven = sorted(path.name for path in lab.markers.iterdir())
    assert driven and all(name.startswith(("main-off-", "child-off-")) for name in driven), driven


async def test_no_unix_socket_but_its_own_and_no_way_around_the_filter(attacked) -> None:
    _, results = attacked
    off = results["off"]["main"]
    assert off["ssh_agent"] == "1 keys" and "docker-stand-in" in off["docker"] and off["abstract"] == "ok"
    for profile in ENFORCED:
        for kind in KINDS:
            attack = results[profile][kind]
            for name in ("ssh_agent", "docker", "abstract", "vsock"):
                assert _refused(attack[name]), (profile, kind, name, attack[name])
            assert attack["io_uring"] == "errno 38", (profile, kind)  # ENOSYS: io_uring would bypass the filter
            assert attack["socketpair"] == "ok"  # asyncio and multiprocessing still have their pairs
            # another architecture's table (i386's socketcall through int 0x80): refused as a whole
            assert attack["i386_socketcall"] in ("errno 1", "not x86-64"), (profile, kind, attack["i386_socketcall"])
    # where this Linux runs 32-bit calls at all, the way around works without the filter
    assert results["off"]["main"]["i386_socketcall"] in ("socket", "errno 38", "not x86-64")


async def test_nothing_is_planted_that_git_editors_python_the_shell_or_freeact_sub_run_later(attacked) -> None:
    lab, results = attacked
    planted = ("git_hook", "git_config", "git_link", "venv_pth", "vscode_tasks", "command_file", "env_example",
               "swap_project", "swap_git")
    off = results["off"]["main"]
    assert all(off[name] == "ok" for name in planted), off
    for profile in ENFORCED:
        work = results[profile]["work"]
        for kind in KINDS:
            attack = results[profile][kind]
            for name in planted:
                # EACCES (not writable), EROFS (kept read-only), EBUSY (a mount point), EXDEV (a link across it)
                assert _refused(attack[name], 13, 30, 16, 18), (profile, kind, name, attack[name])
            assert _refused(attack["bashrc"]), (profile, kind)
        assert not (work / ".git/hooks/pre-commit").exists() and "fsmonitor" not in (work / ".git/config").read_text()
        assert not (work / ".freeact-sub-moved").exists() and not (work / ".freeact-sub/agents/helper.md").exists()
        assert not list((work / ".venv").rglob("evil.pth")) and not (work / ".vscode/tasks.json").exists()
    assert (lab.home / ".bashrc").read_text() != BASHRC  # only `off` could change it


async def test_kernels_read_but_never_change_the_instructions_or_skills_of_a_later_prompt(attacked) -> None:
    _, results = attacked
    attacks = ("agents_md", "agents_md_replace", "skill_write", "skill_link", "skills_swap", "skill_new", "user_skill")
    off = results["off"]
    assert all(off["main"][name] == "ok" for name in attacks), off["main"]  # the attacks work without a sandbox
    assert off["digest_after"] != off["digest_before"]  # and a folder trusted with the old files is asked again
    for profile in ENFORCED:
        for kind in KINDS:
            attack = results[profile][kind]
            for name in attacks:
                # EACCES (the person's folder is hidden), EROFS (kept read-only), EBUSY (a mount point), EXDEV
                assert _refused(attack[name], 13, 30, 16, 18), (profile, kind, name, attack[name])
        found = results[profile]
        assert found["digest_after"] == found["digest_before"], profile
        files = found["prompt_files"]
        told = [file.text for file in files.instructions if file.source == "project"]
        assert told == ["Run the tests with pytest.\n"], profile
        project_skills = {name: skill.body for name, skill in files.skills.items() if skill.source == "project"}
        assert project_skills == {"tidy": "Steps.", "release": "Steps."}, profile
        assert not files.left_out, (profile, files.left_out)
        for kind in KINDS:  # the person's skills are readable, the rest of their freeact-sub folder is not
            assert "name: mine" in found[kind]["user_skill_read"], (profile, kind, found[kind]["user_skill_read"])
            assert _refused(found[kind]["user_config_read"], 13, 2), (profile, kind, found[kind]["user_config_read"])
    assert SECRET in off["main"]["user_config_read"]


async def test_the_host_follows_no_link_a_kernel_made(attacked) -> None:
    lab, results = attacked
    assert results["off"]["main"]["images_link"] == "ok" and results["off"]["child"]["log_link"] == "ok"
    assert "[image not saved" in results["off"]["texts"]["main"]  # the link is refused, even under `off`
    for profile in ENFORCED:
        for kind in KINDS:
            attack = results[profile][kind]
            assert _refused(attack["images_link"], 13, 30), (profile, kind)
            assert _refused(attack["log_link"]), (profile, kind)
            assert "[image saved: " in results[profile]["texts"][kind]
        assert "alive after reset" in results[profile]["texts"]["child"]
    assert not list(lab.outside.iterdir())  # no image went through the link
    assert (lab.home / LOG_TARGET).read_text() == BASHRC  # nor a restarted kernel's log


async def test_no_kernel_holds_the_hosts_key_and_no_secret_is_readable(attacked) -> None:
    _, results = attacked
    off = results["off"]
    assert off["main"]["environ_host"] == "HOSTKEY" and SECRET in off["main"]["devcontainer_env"]
    for profile in PROFILES:  # not even under `off`: the zygote starts with the kernel's environment only
        for kind in KINDS:
            assert results[profile][kind]["environ_self"] == "clean", (profile, kind)
        assert results[profile]["child"]["environ_parent"] in ("clean", "errno 13")
    for profile in ENFORCED:
        for kind in KINDS:
            attack = results[profile][kind]
            for name in ("environ_parent", "environ_host", "devcontainer_env", "dot_env"):
                assert _refused(attack[name]), (profile, kind, name, attack[name])


async def test_no_kernel_opens_the_persons_terminal(attacked) -> None:
    _, results = attacked
    off = results["off"]["main"]
    assert off["host_tty"] == "ok" and off["host_tty_fd"] == "ok"
    for profile in ENFORCED:
        for kind in KINDS:
            attack = results[profile][kind]
            assert _refused(attack["host_tty"], 2, 13), (profile, kind, attack["host_tty"])
            assert _refused(attack["host_tty_fd"]), (profile, kind)
            assert attack["own_pty"] == "ok"  # a terminal of its own still works (pexpect, pty)


async def test_the_host_process_is_out_of_reach_and_ordinary_work_goes_on(attacked) -> None:
    _, results = attacked
    off = results["off"]["main"]
    assert off["host_mem"] == off["host_cwd"] == off["signal_host"] == "ok"
    for profile in ENFORCED:
        for kind in KINDS:
            attack = results[profile][kind]
            assert _refused(attack["host_mem"]) and _refused(attack["host_cwd"]), (profile, kind)
            assert attack["signal_host"] == "errno 1", (profile, kind)
            assert attack["read_data"] == "plain data"
            assert attack["git_status"] == "0", (profile, kind, attack["git_status"])


async def test_a_profile_that_names_a_socket_reaches_that_one_only(attacked, tmp_path: Path) -> None:
    lab, _ = attacked
    from freeact_sub.kernels.local import Kernel
    from freeact_sub.sandbox import SandboxProfile

    profile = SandboxProfile(name="docker", unix_sockets=(str(lab.docker_socket),))
    code = (
        "import socket\n"
        "def reach(path):\n"
        "    try:\n"
        "        with socket.socket(socket.AF_UNIX) as sock:\n"
        "            sock.connect(path); sock.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n'); return sock.recv(100)[:15]\n"
        "    except OSError as exc:\n"
        "        return f'errno {exc.errno}'\n"
        f"print(reach({str(lab.docker_socket)!r}), reach({str(lab.ssh_socket)!r}))\n"
    )
    async with Kernel(working_dir=tmp_path, sandbox=profile.plan(tmp_path, [str(lab.home)])) as kernel:
        result = await kernel.execute(code)
    assert result.text.strip() == "b'HTTP/1.0 200 OK' errno 13", result.text  # the ssh-agent's socket: covered
