"""Servers for the network tests: named hosts on 127.0.0.1, a package index, and a resolver the proxy uses.

`ok.test`, `pypi.test` and `evil.test` are HTTP servers on 127.0.0.1 (each on a port of its own, each counting
what reaches it). The proxy resolves names with `NetLab.resolve` (`proxy.set_resolver`), which maps them and
records every name it was asked for: a name the proxy refused must never be among them (no DNS leak).
"""

from __future__ import annotations

import base64
import hashlib
import io
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from freeact_sub.sandbox import proxy as sandbox_proxy

NAMES = {"ok.test": "127.0.0.1", "pypi.test": "127.0.0.1", "evil.test": "127.0.0.1",
         "inner.ok.test": "192.168.77.1"}
"""What the test resolver answers (`inner.ok.test` matches `*.ok.test` but is a private address)."""


def tiny_wheel() -> bytes:
    """A valid, minimal pure-Python wheel: `tinypkg` 0.1."""
    files = {"tinypkg/__init__.py": b"VALUE = 42\n",
             "tinypkg-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 0.1\n",
             "tinypkg-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                            b"Tag: py3-none-any\n"}
    record = ""
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{name},sha256={digest},{len(data)}\n"
    files["tinypkg-0.1.dist-info/RECORD"] = (record + "tinypkg-0.1.dist-info/RECORD,,\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


class Server:
    """One HTTP server on 127.0.0.1: `/` echoes the Host header, `/simple/…` and `/files/…` are an index, `/big`
    sends `big` bytes. It counts the requests it got."""

    def __init__(self, name: str, big: int = 0) -> None:
        self.name = name
        self.hits: list[str] = []
        wheel = tiny_wheel()
        digest = hashlib.sha256(wheel).hexdigest()
        owner = self
        payload = b"x" * big

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                owner.hits.append(f"{self.headers.get('Host', '')} {self.path}")
                if self.path.startswith("/simple/tinypkg"):
                    body = (f'<html><body><a href="/files/tinypkg-0.1-py3-none-any.whl#sha256={digest}">'
                            "tinypkg-0.1-py3-none-any.whl</a></body></html>").encode()
                    kind = "text/html"
                elif self.path.startswith("/files/tinypkg-0.1-py3-none-any.whl"):
                    body, kind = wheel, "application/octet-stream"
                elif self.path.startswith("/big"):
                    body, kind = payload, "application/octet-stream"
                elif self.path.startswith("/simple"):
                    self.send_error(404)
                    return
                else:
                    body, kind = f"{owner.name} says hello to {self.headers.get('Host', '')}".encode(), "text/plain"
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


class NetLab:
    """The named servers and the resolver; `close()` stops them and gives the proxy the system's resolver back."""

    def __init__(self) -> None:
        self.servers = {name: Server(name) for name in ("ok.test", "pypi.test", "evil.test")}
        self.asked: list[str] = []

    def resolve(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        if host not in NAMES:
            raise OSError(f"no such test host: {host}")
        return [NAMES[host]]

    def parameters(self) -> dict[str, Any]:
        return {"ports": {name: server.port for name, server in self.servers.items()}}

    def close(self) -> None:
        for server in self.servers.values():
            server.close()


@contextmanager
def net_lab() -> Iterator[NetLab]:
    lab = NetLab()
    sandbox_proxy.set_resolver(lab.resolve)
    try:
        yield lab
    finally:
        sandbox_proxy.set_resolver(None)
        lab.close()
