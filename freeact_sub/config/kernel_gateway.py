"""`KernelGatewayConfig`: kernels on a Jupyter Kernel Gateway or Enterprise Gateway, and the headers sent to it."""

from __future__ import annotations

import getpass
import json
import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..errors import ConfigError

__all__ = ["KernelGatewayConfig"]


class KernelGatewayConfig(BaseModel):
    """Kernels on a Jupyter Kernel Gateway or Enterprise Gateway instead of this machine.

    Secrets are never written into the config: the token and extra headers are read from the
    environment variables named here (the same ones Jupyter's own gateway client reads).

    Every kernel start names its user in the kernel's environment as `KERNEL_USERNAME`, as
    Jupyter Server's gateway client does: Enterprise Gateway starts kernels only for users it
    authorizes (and never for `root` unless configured so); Kernel Gateway passes it on to the kernel.
    """

    model_config = ConfigDict(extra="forbid")

    url: str
    """Base URL of the gateway, e.g. `http://127.0.0.1:8888` or `https://gateway.example.org/base`."""
    kernel_name: str = "python3"
    """The kernel spec to start on the gateway."""
    token_env: str = "JUPYTER_GATEWAY_AUTH_TOKEN"
    """Environment variable holding the gateway's token (sent as `Authorization: token …`); unset: no token."""
    headers_env: str = "JUPYTER_GATEWAY_HEADERS"
    """Environment variable holding extra HTTP headers as a JSON object (for a proxy's own auth); unset: none."""
    start_timeout: float = Field(default=120.0, gt=0)
    """Seconds a kernel may take to start (Enterprise Gateway may first have to pull an image)."""
    request_timeout: float = Field(default=30.0, gt=0)
    """Seconds any other gateway request may take."""
    validate_cert: bool = True
    """Check the gateway's TLS certificate (`https`/`wss`)."""
    username: str | None = None
    """The user kernels are started for (`KERNEL_USERNAME`); None: a `KERNEL_USERNAME` in `kernel_env`, else
    the user running this program. Enterprise Gateway refuses users it does not authorize."""

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("expected an http:// or https:// URL of the gateway")
        return value.rstrip("/")

    @field_validator("username")
    @classmethod
    def _plain_username(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or value != value.strip() or not value.isprintable()):
            raise ValueError("expected a user name without surrounding spaces or control characters")
        return value

    def kernel_username(self, kernel_env: Mapping[str, str] | None = None) -> str:
        """The `KERNEL_USERNAME` of every kernel start: `username`, else `kernel_env`'s, else the host user's name."""
        if self.username is not None:
            return self.username
        given = (kernel_env or {}).get("KERNEL_USERNAME", "").strip()
        if given:
            return given
        try:
            return getpass.getuser()
        except (KeyError, OSError) as exc:  # no login name in the environment and no passwd entry for our uid
            raise ConfigError(
                f"kernel_gateway.username: not set, and the name of the user running this program is unknown ({exc})"
            ) from None

    def headers(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The HTTP headers of every request: the token and extra headers from the environment."""
        environ = os.environ if environ is None else environ
        headers: dict[str, str] = {}
        raw = environ.get(self.headers_env, "").strip()
        if raw:
            try:
                extra = json.loads(raw)
            except json.JSONDecodeError as exc:
                message = f"kernel_gateway.headers_env: {self.headers_env} is not a JSON object: {exc}"
                raise ConfigError(message) from None
            if not isinstance(extra, dict) or not all(isinstance(v, str) for v in extra.values()):
                raise ConfigError(f"kernel_gateway.headers_env: {self.headers_env} must be a JSON object of strings")
            headers.update(extra)
        token = environ.get(self.token_env, "").strip()
        if token:
            headers["Authorization"] = f"token {token}"
        return headers

