"""The REST and websocket halves of a Jupyter Kernel Gateway / Enterprise Gateway, for `GatewayKernel`.

REST (`httpx`): start, look up, interrupt, restart and delete kernels. Websocket (`websockets`):
a kernel's channels at `/api/kernels/{id}/channels`, spoken in the gateway's JSON message form,
with messages built by `jupyter_client.session.Session`. Every failure to reach the gateway, and
every request it refuses, is a `KernelError` that names the gateway's URL and quotes the
gateway's own reason (Kernel and Enterprise Gateway answer errors as JSON `reason`/`message`).
Only a refusal that is about credentials (a 401, or a 403 that says so) mentions the token.

Kernels this process started are deleted at host exit (best effort, a few seconds); one that
cannot be deleted is left to the gateway's idle culling.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import itertools
import json
import re
import secrets
import socket
import ssl
import struct
import threading
import time
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx
from jupyter_client.jsonutil import json_default
from jupyter_client.session import Session
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from ..errors import KernelError

__all__ = ["Closed", "GatewayApi", "GatewayRefusal", "KernelChannels", "QuickAckConnection"]

_EXIT_DELETE_TIMEOUT = 3.0


class GatewayApi:
    """The gateway's kernel REST API, with its errors turned into `KernelError`s naming the URL."""

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str],
        *,
        token_env: str,
        request_timeout: float,
        validate_cert: bool = True,
    ) -> None:
        self.url = url.rstrip("/")
        self.headers = dict(headers)
        self.validate_cert = validate_cert
        self._token_env = token_env
        self._timeout = request_timeout
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=self.headers, timeout=request_timeout, verify=tls_context(validate_cert)
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _request(
        self, method: str, path: str, *, body: Any = None, timeout: float | None = None, missing_ok: bool = False
    ) -> httpx.Response | None:
        try:
            response = await self._http.request(method, path, json=body, timeout=timeout or self._timeout)
        except httpx.TimeoutException:
            raise KernelError(
                f"kernel gateway {self.url}: no answer to {method} {path} within {timeout or self._timeout:g} s"
            ) from None
        except httpx.HTTPError as exc:
            raise KernelError(f"kernel gateway {self.url} cannot be reached: {exc or type(exc).__name__}") from None
        status = response.status_code
        if status == 404 and missing_ok:
            return None
        if status >= 400:
            raise GatewayRefusal(self.refusal(f"{method} {path}", status, _reason(status, response.content)), status)
        return response

    def refusal(self, request: str, status: int, reason: str) -> str:
        """The message for a request the gateway answered with an error: its reason, and a token hint if it fits.

        A 401, or a 403 whose reason is about credentials, asks for a (different) token; any
        other refusal (Enterprise Gateway's unauthorized user, a resource limit, an unknown
        kernel spec) has nothing to do with the token, and its reason says what it is about.
        """
        if status < 500:
            message = f"kernel gateway {self.url} refused {request} (HTTP {status}): {reason}"
        else:
            message = f"kernel gateway {self.url}: {request} failed with HTTP {status}: {reason}"
        if status == 401 or (status == 403 and _CREDENTIALS.search(reason)):
            if "Authorization" in self.headers:
                message += f" (the token in ${self._token_env} was refused)"
            else:
                message += f" (it wants a token: set ${self._token_env})"
        return message

    async def start_kernel(self, name: str, env: Mapping[str, str], timeout: float, kernel_id: str) -> str:
        """Start a kernel of spec `name` with `env`; returns its id once the gateway reports it started.

        The id is chosen here (gateways on jupyter_server 2 take it), and known before the request
        goes out: a start cut short (cancelled, timed out) can still be deleted, and is, at exit.
        """
        _exit_deletes.add(self, kernel_id)
        body = {"name": name, "env": dict(env), "kernel_id": kernel_id}
        try:
            response = await self._request("POST", "/api/kernels", body=body, timeout=timeout)
        except GatewayRefusal as refused:
            if refused.status < 500:
                _exit_deletes.discard(kernel_id)  # refused: the gateway started nothing
            user = env.get("KERNEL_USERNAME")
            about_user = user is not None and ("KERNEL_USERNAME" in str(refused) or f"'{user}'" in str(refused))
            if refused.status == 403 and about_user:
                raise GatewayRefusal(
                    f"{refused} [kernels are started for user {user!r}: set kernel_gateway.username "
                    "(or --gateway-username) to a user the gateway authorizes]",
                    refused.status,
                ) from None
            raise
        assert response is not None
        given = response.json().get("id")
        if not isinstance(given, str):
            raise KernelError(f"kernel gateway {self.url}: the answer to POST /api/kernels has no kernel id")
        if given != kernel_id:  # a gateway that picks its own ids
            _exit_deletes.discard(kernel_id)
            _exit_deletes.add(self, given)
        return given

    async def kernel(self, kernel_id: str) -> dict[str, Any] | None:
        """The gateway's model of the kernel (`execution_state`, …), or None if it has no such kernel."""
        response = await self._request("GET", f"/api/kernels/{quote(kernel_id)}", missing_ok=True)
        return None if response is None else dict(response.json())

    async def list_kernels(self) -> list[dict[str, Any]]:
        response = await self._request("GET", "/api/kernels")
        assert response is not None
        return list(response.json())

    async def interrupt(self, kernel_id: str) -> None:
        await self._request("POST", f"/api/kernels/{quote(kernel_id)}/interrupt", missing_ok=True)

    async def restart(self, kernel_id: str, timeout: float) -> bool:
        """Restart the kernel; False if the gateway no longer has it."""
        path = f"/api/kernels/{quote(kernel_id)}/restart"
        return await self._request("POST", path, timeout=timeout, missing_ok=True) is not None

    async def delete(self, kernel_id: str, timeout: float | None = None) -> None:
        """Shut the kernel down (a kernel already gone is fine).

        Only a kernel the gateway confirms deleted leaves the exit list: one that is not there
        (yet: a start cut short may still be under way) is asked for again at exit.
        """
        response = await self._request("DELETE", f"/api/kernels/{quote(kernel_id)}", timeout=timeout, missing_ok=True)
        if response is not None:
            _exit_deletes.discard(kernel_id)

    def channels_url(self, kernel_id: str, session_id: str) -> str:
        base = "ws" + self.url.removeprefix("http")
        return f"{base}/api/kernels/{quote(kernel_id)}/channels?session_id={quote(session_id)}"


class GatewayRefusal(KernelError):
    """The gateway answered a request with an HTTP error (`status`); the message quotes its reason."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


# words of a refusal about credentials (not Enterprise Gateway's "User 'x' is not authorized to start kernel")
_CREDENTIALS = re.compile(r"token|authenticat|credential|unauthori[sz]ed|log ?in\b", re.IGNORECASE)


def _reason(status: int, body: bytes) -> str:
    """The gateway's own words for an error answer.

    Its JSON `reason` and `message` (Enterprise Gateway puts the detail in `reason`, Jupyter
    Server in `message`; a bare status phrase is left out), else the start of the body, else the
    status's phrase.
    """
    phrase = _phrase(status)
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return " ".join(text[:300].split()) or phrase
    if not isinstance(data, dict):
        return phrase
    message = str(data.get("message") or "").strip()
    reason = str(data.get("reason") or "").strip()
    if reason == phrase or reason == message:
        reason = ""
    return ": ".join(part for part in (reason, message) if part) or phrase


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return f"HTTP {status}"


class Closed:
    """Put on the message queue when the websocket closes."""


class QuickAckConnection(ClientConnection):
    """A websocket that acknowledges what it receives at once (Linux's `TCP_QUICKACK`), not ~40 ms later.

    The gateway (tornado) writes each kernel message as its own small TCP segment with Nagle's
    algorithm on: after `status: busy` it holds `execute_input`, `execute_reply` and `status: idle`
    until our ACK of `busy` comes, and Linux delays that ACK up to 40 ms (an interactive
    connection waits for data to carry it). A trivial cell then takes ~46 ms instead of ~5.
    Quick-ack mode is not sticky (the kernel leaves it again), so it is set after every read. The
    gateway can remove the stall on its side too: `TCP_NODELAY` on its websockets (README).
    """

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        sock = self.transport.get_extra_info("socket") if _QUICKACK is not None else None
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
            except OSError:  # not a TCP socket (a proxy's Unix socket), or closed meanwhile
                pass


_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)
"""Linux only; elsewhere the connection is a plain one."""


class KernelChannels:
    """One websocket to a kernel's channels: messages out through `send`, everything in onto `messages`.

    A background task reads the socket as fast as it delivers, so the gateway never has to hold
    output back for us; what arrives between cells waits in the (unbounded) queue.
    """

    def __init__(self, api: GatewayApi, kernel_id: str) -> None:
        self.messages: asyncio.Queue[dict[str, Any] | Closed | None] = asyncio.Queue()
        self._api = api
        self._kernel_id = kernel_id
        # each connection is its own client session: the gateway never hands us another one's buffered channels
        self._session = Session(key=secrets.token_bytes(16), username="freeact-sub")
        self._socket: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None

    async def open(self, timeout: float) -> None:
        url = self._api.channels_url(self._kernel_id, self._session.session)
        try:
            self._socket = await connect(
                url,
                additional_headers=self._api.headers,
                open_timeout=timeout,
                max_size=None,
                max_queue=None,
                compression=None,
                # no keepalive pings of our own: a pong queued behind a flood of output arrives late and would
                # close a healthy connection; a gateway that is gone shows in the REST checks instead
                ping_interval=None,
                ssl=None if url.startswith("ws:") else tls_context(self._api.validate_cert),
                create_connection=QuickAckConnection,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            reason = _reason(status, bytes(exc.response.body or b""))
            raise GatewayRefusal(self._api.refusal("the kernel's websocket", status, reason), status) from None
        except (OSError, TimeoutError) as exc:
            raise KernelError(f"kernel gateway {self._api.url}: the kernel's websocket failed: {exc}") from None
        self._reader = asyncio.create_task(self._read(self._socket), name=f"gateway-kernel:{self._kernel_id}")

    async def _read(self, socket: ClientConnection) -> None:
        try:
            async for frame in socket:
                try:
                    message: dict[str, Any] | None = _decode(frame)
                except (ValueError, TypeError, struct.error, RecursionError):
                    message = None  # the kernel's message could not be decoded: the cell reader counts it
                self.messages.put_nowait(message)
        except ConnectionClosed:
            pass
        finally:
            self.messages.put_nowait(Closed())

    async def send(self, channel: str, msg_type: str, content: dict[str, Any]) -> str:
        """Send one request; returns its message id."""
        message = self._session.msg(msg_type, content)
        message["channel"] = channel
        if self._socket is None:
            raise KernelError("the kernel's websocket is not open")
        try:
            await self._socket.send(json.dumps(message, default=json_default))
        except ConnectionClosed:
            self.messages.put_nowait(Closed())
        return str(message["header"]["msg_id"])

    async def close(self) -> None:
        reader, self._reader = self._reader, None
        socket, self._socket = self._socket, None
        if reader is not None:
            reader.cancel()
        if socket is not None:
            socket.close_timeout = 1.0
            try:
                await socket.close()
            except Exception:  # a socket that fails to close politely is dropped all the same
                pass
        if reader is not None:
            await asyncio.gather(reader, return_exceptions=True)


def _decode(frame: str | bytes) -> dict[str, Any]:
    """A message from the gateway: JSON text, or the binary form (offsets, JSON, buffers) for messages with buffers."""
    if isinstance(frame, str):
        return dict(json.loads(frame))
    count = struct.unpack("!I", frame[:4])[0]
    offsets = [*struct.unpack(f"!{count}I", frame[4 : 4 * (count + 1)]), len(frame)]
    message = dict(json.loads(frame[offsets[0] : offsets[1]]))
    message["buffers"] = [frame[start:end] for start, end in itertools.pairwise(offsets[1:])]
    return message


@functools.cache
def tls_context(verify: bool) -> ssl.SSLContext:
    """One TLS context per process: loading the CA certificates takes ~0.1 s of CPU, too much for
    every kernel (the pool starts kernels while the agents' event loop is busy with other work)."""
    try:
        import certifi

        context = ssl.create_default_context(cafile=certifi.where())
    except ImportError:
        context = ssl.create_default_context()
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class _ExitDeletes:
    """Kernels this process started on gateways and has not deleted: deleted at interpreter exit."""

    def __init__(self) -> None:
        self._kernels: dict[str, tuple[str, dict[str, str], bool]] = {}
        self._lock = threading.Lock()
        self._registered = False

    def add(self, api: GatewayApi, kernel_id: str) -> None:
        with self._lock:
            self._kernels[kernel_id] = (api.url, api.headers, api.validate_cert)
            if not self._registered:
                atexit.register(self.delete_all)
                self._registered = True

    def discard(self, kernel_id: str) -> None:
        with self._lock:
            self._kernels.pop(kernel_id, None)

    def delete_all(self) -> None:
        """Delete every kernel still registered, in parallel, giving up after a few seconds."""
        with self._lock:
            kernels, self._kernels = self._kernels, {}
        if not kernels:
            return

        def delete(kernel_id: str, url: str, headers: dict[str, str], verify: bool) -> None:
            try:
                httpx.delete(f"{url}/api/kernels/{quote(kernel_id)}", headers=headers, verify=verify,
                             timeout=_EXIT_DELETE_TIMEOUT)
            except httpx.HTTPError:
                pass  # left to the gateway's idle culling

        # plain threads: executors refuse new work once the interpreter is shutting down
        threads = [
            threading.Thread(target=delete, args=(kernel_id, *details), daemon=True)
            for kernel_id, details in kernels.items()
        ]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + _EXIT_DELETE_TIMEOUT + 1
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))


_exit_deletes = _ExitDeletes()
