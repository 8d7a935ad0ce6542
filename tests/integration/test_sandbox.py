"""The sandbox, tried from inside real kernels: every way out a cell might take, under each profile.

A fake home holds a key (`~/.ssh/id_rsa`), the working folder holds a `.env`, and a TCP and a
UDP server listen on 127.0.0.1. One cell per agent runs every probe and prints what each got;
nothing is mocked: the kernel, the namespaces and Landlock are the real ones.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from freeact_sub import Agent, AgentConfig, CodeExecutionOutput, ConfigError, SubagentStarted
from freeact_sub.sandbox import platform_problem
from tests.conftest import CALC_SERVER, ROOT
from tests.scripting import Call, Router, Script, configs, drive, of
from tests.security.lab import ATTEMPT

pytestmark = pytest.mark.skipif(platform_problem() is not None, reason=f"no sandbox here: {platform_problem()}")

SECRET = "SECRET-KEY-MATERIAL-4711"
FILES_SERVER = ROOT / "tests" / "servers" / "files_server.py"

PROBE = r'''
import ctypes, json, os, socket, subprocess, sys, tempfile
home, outside, tcp_port, udp_port, host_pid = {home!r}, {outside!r}, {tcp}, {udp}, {host}
key = os.path.join(home, ".ssh", "id_rsa")
results = {{}}
''' + ATTEMPT + r'''
def write(path):
    with open(path, "w") as file:
        file.write("x")

def tcp():
    socket.create_connection(("127.0.0.1", tcp_port), timeout=5).close()

def udp():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"ping", ("127.0.0.1", udp_port))

def shell(command):
    done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True)
    return f"exit {{done.returncode}}: {{done.stdout.strip()}}"

def unshare_and_unmount():
    # a fresh single-threaded process tries to get caps in a new user namespace and lift the cover
    code = (
        "import ctypes, sys\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.unshare(0x10000000 | 0x20000), libc.umount2(sys.argv[1].encode(), 2))\n"
        "print(open(sys.argv[2]).read())\n"
    )
    done = subprocess.run([sys.executable, "-c", code, os.path.dirname(key), key], capture_output=True, text=True)
    return f"exit {{done.returncode}}: {{done.stdout.strip()}}"

libc = ctypes.CDLL(None, use_errno=True)
attempt("read_key", lambda: open(key).read())
attempt("list_ssh", lambda: os.listdir(os.path.dirname(key)))
attempt("read_env", lambda: open(".env").read())
attempt("read_data", lambda: open("data.txt").read())
attempt("read_system", lambda: open("/etc/hostname").read() and None)
attempt("write_cwd", lambda: write("new.txt"))
attempt("write_outside", lambda: write(os.path.join(outside, "escaped.txt")))
attempt("write_env", lambda: write(".env"))
attempt("remove_env", lambda: os.remove(".env"))
attempt("write_tmp", lambda: tempfile.TemporaryFile().close())
attempt("tcp", tcp)
attempt("udp", udp)
attempt("shell_cat", lambda: shell(f"cat {{key}}"))
attempt("os_system", lambda: os.system(f"cat {{key}} > {{outside}}/leak.txt; cat {{key}} > leak.txt"))
attempt("umount", lambda: f"{{libc.umount2(os.path.dirname(key).encode(), 2)}} errno {{ctypes.get_errno()}}")
attempt("unshare_and_unmount", unshare_and_unmount)
attempt("proc_root", lambda: open(f"/proc/{{host_pid}}/root{{key}}").read())
attempt("signal_host", lambda: os.kill(host_pid, 0))
attempt("read_key_again", lambda: open(key).read())
print("PROBE" + json.dumps(results))
'''


class _Servers:
    """A TCP and a UDP server on 127.0.0.1 that count what reaches them."""

    def __init__(self) -> None:
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.settimeout(0.2)
        self.udp_received = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self.tcp.settimeout(0.2)
        while not self._stop.is_set():
            try:
                connection, _ = self.tcp.accept()
                connection.close()
            except OSError:
                pass
            try:
                self.udp.recv(16)
                self.udp_received += 1
            except OSError:
                pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.tcp.close()
        self.udp.close()


@pytest.fixture
def servers() -> Iterator[_Servers]:
    with contextlib.closing(_Servers()) as running:
        yield running


@pytest.fixture
def place(tmp_path: Path) -> dict[str, Path]:
    home, work, outside = tmp_path / "home", tmp_path / "work", tmp_path / "outside"
    for folder in (home / ".ssh", work, outside):
        folder.mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(SECRET)
    (work / ".env").write_text(f"API_KEY={SECRET}")
    (work / "data.txt").write_text("plain data")
    return {"home": home, "work": work, "outside": outside}


def _probe(place: dict[str, Path], servers: _Servers) -> str:
    return PROBE.format(home=str(place["home"]), outside=str(place["outside"]), tcp=servers.tcp.getsockname()[1],
                        udp=servers.udp.getsockname()[1], host=os.getpid())


def _config(model: Any, place: dict[str, Path], **settings: Any) -> AgentConfig:
    return configs(auto_approve=True, kernel_env={"HOME": str(place["home"])})(model, place["work"], **settings)


def _results(events: list[Any], agent_id: str | None = None) -> tuple[dict[str, str], str]:
    outputs = [e for e in of(CodeExecutionOutput, events) if agent_id is None or e.agent_id == agent_id]
    (output,) = outputs
    line = next(line for line in output.content.splitlines() if line.startswith("PROBE"))
    return json.loads(line.removeprefix("PROBE")), output.content


async def _run_probe(place: dict[str, Path], servers: _Servers, **settings: Any) -> tuple[dict[str, str], str]:
    """The probe's results, and the cell's result as the model got it."""
    script = Script([Call("execute_ipython_cell", {"code": _probe(place, servers)})], ["done"])
    async with Agent(_config(script.model, place, enable_subagents=False, **settings)) as agent:
        events = await drive(agent.stream("probe"))
    results, text = _results(events)
    seen_by_model = str(next(iter(script.tool_results(1).values())))
    assert SECRET not in text and SECRET not in seen_by_model
    assert not (place["outside"] / "escaped.txt").exists() and not (place["outside"] / "leak.txt").exists()
    assert SECRET not in ((place["work"] / "leak.txt").read_text() if (place["work"] / "leak.txt").exists() else "")
    assert (place["work"] / ".env").read_text() == f"API_KEY={SECRET}"  # neither changed nor removed
    return results, seen_by_model


def _confined(results: dict[str, str]) -> None:
    """What every enforced profile refuses, whatever it allows."""
    assert results["read_key"] == results["list_ssh"] == results["read_env"] == "errno 13"
    assert results["read_data"] == "plain data" and results["read_system"] == "ok"
    assert results["write_outside"] == results["write_env"] == "errno 13"
    assert results["remove_env"] in ("errno 13", "errno 16")  # refused, or busy: a cover cannot be removed
    assert results["write_tmp"] == "ok"
    assert results["shell_cat"].startswith("exit 1") and SECRET not in results["shell_cat"]
    assert results["umount"].startswith("-1")
    assert results["unshare_and_unmount"].startswith("exit 1") and SECRET not in results["unshare_and_unmount"]
    assert results["proc_root"] == "errno 13"
    assert results["read_key_again"] == "errno 13"


async def test_workspace_reads_no_secret_writes_only_the_working_folder_and_not_the_hosts_loopback(
    place: dict[str, Path], servers: _Servers
) -> None:
    results, text = await _run_probe(place, servers)  # the default profile
    _confined(results)
    assert results["write_cwd"] == "ok"
    # network on is the public internet through the proxy: the host's 127.0.0.1 is not the kernel's
    assert results["tcp"] == "errno 111"
    assert servers.udp_received == 0
    assert results["signal_host"] == "errno 1"  # Landlock ABI 6+: no signals out of the sandbox
    assert "[sandbox]" in text and "profile workspace" in text  # the refusal is explained to the model


async def test_offline_has_no_network_at_all(place: dict[str, Path], servers: _Servers) -> None:
    results, _ = await _run_probe(place, servers, sandbox="offline")
    _confined(results)
    assert results["write_cwd"] == "ok"
    assert results["tcp"] == results["udp"] == "errno 101"
    assert servers.udp_received == 0


async def test_read_only_writes_nothing_but_its_temp_folder(place: dict[str, Path], servers: _Servers) -> None:
    results, text = await _run_probe(place, servers, sandbox="read-only")
    _confined(results)
    assert results["write_cwd"] == "errno 13" and not (place["work"] / "new.txt").exists()
    assert results["tcp"] == "errno 101"
    assert "[sandbox]" in text and "profile read-only" in text and "no network" in text


async def test_off_is_the_users_full_rights(place: dict[str, Path], servers: _Servers) -> None:
    """The probe itself works: with the sandbox off it reads the key (so the other tests would see a leak)."""
    script = Script([Call("execute_ipython_cell", {"code": _probe(place, servers)})], ["done"])
    async with Agent(_config(script.model, place, enable_subagents=False, sandbox="off")) as agent:
        assert agent.sandbox.name == "off" and not agent.sandbox.enforced
        events = await drive(agent.stream("probe"))
    results, _ = _results(events)
    assert results["read_key"] == SECRET and results["write_outside"] == "ok"
    assert "[sandbox]" not in str(script.tool_results(1))


async def test_a_custom_profile_adds_a_writable_folder_and_a_denied_path(place: dict[str, Path]) -> None:
    (place["work"] / "private").mkdir()
    (place["work"] / "private" / "notes.txt").write_text("private notes")
    code = (
        f"open({str(place['outside'] / 'allowed.txt')!r}, 'w').write('x')\n"
        "try:\n    open('private/notes.txt').read()\nexcept OSError as e:\n    print('denied', e.errno)\n"
    )
    script = Script([Call("execute_ipython_cell", {"code": code})], ["done"])
    profile = {"read_deny": ["private"], "write": [".", str(place["outside"])], "network": False}
    async with Agent(_config(script.model, place, enable_subagents=False, sandbox=profile)) as agent:
        events = await drive(agent.stream("go"))
    (output,) = of(CodeExecutionOutput, events)
    assert "denied 13" in output.content and (place["outside"] / "allowed.txt").exists()


async def test_children_are_never_less_confined_than_their_parent(place: dict[str, Path], servers: _Servers) -> None:
    """A `read-only` type under `workspace` cannot write; a `workspace` type under `offline` gets no network;
    a child without a type of its own runs under its parent's profile (its kernel comes from the pool)."""
    probe = _probe(place, servers)
    types = {"reviewer": {"description": "reads", "sandbox": "read-only"},
             "fetcher": {"description": "fetches", "sandbox": "workspace"}}
    for parent_profile, expected in (
        ("workspace", {"reviewer": "read-only", "fetcher": "workspace", "general": "workspace"}),
        ("offline", {"reviewer": "read-only", "fetcher": "offline", "general": "offline"}),
    ):
        parent = Script(
            [Call("task", {"prompt": "CHILD-ro probe", "subagent_type": "reviewer"}, id="t1"),
             Call("task", {"prompt": "CHILD-net probe", "subagent_type": "fetcher"}, id="t2"),
             Call("task", {"prompt": "CHILD-plain probe"}, id="t3")],
            ["all done"],
        )
        children = {name: Script([Call("execute_ipython_cell", {"code": probe})], ["ok"])
                    for name in ("CHILD-ro", "CHILD-net", "CHILD-plain")}
        model = Router({"PARENT": parent, **children}).model
        config = _config(model, place, sandbox=parent_profile, agents=types, max_subagents=3)
        async with Agent(config) as agent:
            events = await drive(agent.stream("PARENT go"))
        started = {e.agent_type: e for e in of(SubagentStarted, events)}
        assert {kind: e.sandbox for kind, e in started.items()} == expected
        by_type = {kind: _results(events, e.subagent_id)[0] for kind, e in started.items()}
        for results in by_type.values():
            _confined(results)
        assert by_type["reviewer"]["write_cwd"] == "errno 13" and by_type["reviewer"]["tcp"] == "errno 101"
        # under `workspace` a loopback of its own (the host's 127.0.0.1 is not reached: refused), under `offline` none
        network = "errno 111" if parent_profile == "workspace" else "errno 101"
        assert by_type["fetcher"]["tcp"] == by_type["general"]["tcp"] == network


async def test_mcp_tools_from_code_and_images_work_in_a_sandboxed_kernel(place: dict[str, Path]) -> None:
    png = (  # a 1x1 PNG
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
    )
    code = (
        "from mcptools.calc import add\nprint('sum', add(a=2, b=3))\n"
        "import base64\nfrom IPython.display import Image, display\n"
        f"display(Image(data=base64.b64decode({png!r})))"
    )
    script = Script([Call("execute_ipython_cell", {"code": code})], ["done"])
    config = _config(script.model, place, enable_subagents=False, mcp_tools="code", sandbox="offline",
                     mcp_servers={"calc": {"command": sys.executable, "args": [str(CALC_SERVER)]}})
    async with Agent(config) as agent:
        events = await drive(agent.stream("go"))
    (output,) = of(CodeExecutionOutput, events)
    assert "sum 5" in output.content and output.status == "ok"
    assert len(output.images) == 1 and output.images[0].exists()


async def test_a_kernel_restarted_after_a_reset_is_still_confined(place: dict[str, Path]) -> None:
    key = str(place["home"] / ".ssh" / "id_rsa")
    read = f"try:\n    open({key!r}).read()\nexcept OSError as e:\n    print('errno', e.errno)"
    script = Script([Call("reset_kernel", {})], [Call("execute_ipython_cell", {"code": read})], ["done"])
    async with Agent(_config(script.model, place, enable_subagents=False)) as agent:
        events = await drive(agent.stream("go"))
    (output,) = of(CodeExecutionOutput, events)
    assert "errno 13" in output.content


async def test_a_sandboxed_stdio_mcp_server_cannot_read_secrets(place: dict[str, Path]) -> None:
    """`sandbox` on a server's config confines the server process (it reads files for the model)."""
    kernel_files: list[str] = []
    script = Script(
        lambda _: [Call("files_read_file", {"path": str(place["home"] / ".ssh" / "id_rsa")}, id="key"),
                   Call("files_read_file", {"path": str(place["work"] / "data.txt")}, id="data"),
                   Call("files_read_file", {"path": kernel_files[0]}, id="kernel")],
        ["done"],
    )
    server = {"command": sys.executable, "args": [str(FILES_SERVER)], "sandbox": "read-only",
              "env": {"HOME": str(place["home"])}}
    config = _config(script.model, place, enable_subagents=False, mcp_servers={"files": server})
    async with Agent(config) as agent:
        socket_path = agent.kernel.tools_socket if agent.kernel is not None else None
        assert socket_path is not None
        kernel_files.append(os.path.join(os.path.dirname(os.path.dirname(socket_path)), "connection.json"))
        await drive(agent.stream("go"))
    results = script.tool_results(1)
    assert SECRET not in results["key"] and "Permission denied" in results["key"]
    assert "plain data" in results["data"]
    # no kernel's connection file (its key) is there for a confined server either
    assert results["kernel"].startswith("FileNotFoundError"), results["kernel"]


def test_an_explicit_profile_that_cannot_be_enforced_is_a_config_error_and_the_default_falls_back() -> None:
    from freeact_sub.sandbox import effective, profile_from

    with pytest.raises(ConfigError, match=r"cannot be enforced.*'off'"):
        effective(profile_from("workspace"), gateway=True)
    with pytest.warns(UserWarning, match="without a sandbox"):
        fallback = effective(None, gateway=True)
    assert fallback.name == "off" and "gateway" in fallback.note
