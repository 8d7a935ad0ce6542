"""A real Jupyter Kernel Gateway (or Enterprise Gateway) on 127.0.0.1 for the tests: started on a free port,
stopped by PID with its kernels.

Enterprise Gateway cannot be installed next to this project: every release pins `jupyter_client<7`
(and from 3.0 `jupyter_server<2`, `pyzmq<25`), while freeact-sub needs `jupyter-client>=8.6` and
Kernel Gateway 3 needs `jupyter_server>=2`. Its tests run it from an interpreter of its own, named
by `$FREEACT_SUB_TEST_EG_PYTHON` (`python -m venv eg && eg/bin/pip install jupyter_enterprise_gateway`).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

import freeact_sub
from tests.ci_builds import wait_for_build
from tests.cli_fork import START_VARIABLES, module_command

TOKEN_ENV = "FREEACT_SUB_TEST_GATEWAY_TOKEN"
_START_SETTINGS = tuple(name for name in os.environ if name.startswith(START_VARIABLES))
EG_PYTHON_ENV = "FREEACT_SUB_TEST_EG_PYTHON"
EG_WAIT_ENV = "FREEACT_SUB_TEST_EG_WAIT"


@dataclass
class GatewayServer:
    url: str
    token: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"} if self.token else {}

    def kernel_processes(self) -> list[psutil.Process]:
        """The gateway's child processes (its kernels), zombies left out."""
        try:
            children = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.Error:
            return []
        alive = []
        for child in children:
            with contextlib.suppress(psutil.Error):
                if child.status() != psutil.STATUS_ZOMBIE:
                    alive.append(child)
        return alive

    def kernel_ids(self) -> list[str]:
        """The ids of the kernels the gateway runs now (`GET /api/kernels`)."""
        response = httpx.get(f"{self.url}/api/kernels", headers=self.headers, timeout=10)
        response.raise_for_status()
        return [kernel["id"] for kernel in response.json()]

    def wait_for_kernels(self, count: int, timeout: float = 10.0) -> list[str]:
        """The gateway's kernel ids once there are `count` of them (or whatever there is after `timeout`)."""
        deadline = time.monotonic() + timeout
        while True:
            ids = self.kernel_ids()
            if len(ids) == count or time.monotonic() > deadline:
                return ids
            time.sleep(0.1)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def token_gateway(workdir: Path) -> Iterator[GatewayServer]:
    """A gateway whose token the tests' configs read from `TOKEN_ENV` (set while the block runs)."""
    with kernel_gateway(workdir) as server:
        os.environ[TOKEN_ENV] = server.token
        try:
            yield server
        finally:
            os.environ.pop(TOKEN_ENV, None)


@contextlib.contextmanager
def kernel_gateway(
    workdir: Path, *extra_args: str, token: str = "test-token-1234", rate_limit: bool = False
) -> Iterator[GatewayServer]:
    """Run `jupyter-kernelgateway` with a token and kernel listing on until the block ends.

    Its IOPub rate limit is off unless `rate_limit` (then `extra_args` may set its values).
    """
    environment = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    command = [
        sys.executable, "-m", "kernel_gateway",
        "--KernelGatewayApp.ip=127.0.0.1", "--KernelGatewayApp.port={port}", "--KernelGatewayApp.port_retries=0",
        "--JupyterWebsocketPersonality.list_kernels=True",
        "--JupyterWebsocketPersonality.env_whitelist=GRANTED",
        f"--ZMQChannelsWebsocketConnection.limit_rate={rate_limit}",
        # a kernel started with an `env` gets only PATH and these from the gateway: the interpreter's start settings
        # (its locale, PYTHON*) as the tests' own, so that it can be forked by the fork server (`_kernel_spec_...`)
        *(f"--KernelGatewayApp.env_process_whitelist={name}" for name in _START_SETTINGS if name in environment),
        *extra_args,
    ]  # fmt: skip
    with _gateway(workdir, "gateway.log", command, {**environment, "KG_AUTH_TOKEN": token}, token) as server:
        yield server


def enterprise_gateway_python() -> str | None:
    """The interpreter with `jupyter_enterprise_gateway` installed (`$FREEACT_SUB_TEST_EG_PYTHON`), if one is named.

    `.ci/run` names it while it is still building it: `enterprise_gateway_unready` waits for it.
    """
    return os.environ.get(EG_PYTHON_ENV, "").strip() or None


def enterprise_gateway_unready(python: str) -> str | None:
    """None once `python` is there to run; else why not (after waiting up to `$FREEACT_SUB_TEST_EG_WAIT` seconds
    for `.ci/run`'s build of its environment, `tests/ci_builds.py`)."""
    wait = float(os.environ.get(EG_WAIT_ENV, "0"))
    if wait and (why := wait_for_build(Path(python).parent.parent, wait, "the Enterprise Gateway environment")):
        return why
    return None if Path(python).is_file() else f"${EG_PYTHON_ENV} names no file: {python}"


@contextlib.contextmanager
def enterprise_gateway(workdir: Path, python: str, *extra_args: str) -> Iterator[GatewayServer]:
    """Run Jupyter Enterprise Gateway from `python` (no token, kernel listing on) until the block ends.

    Its kernels are local processes (its default process proxy) of our own kernel spec, as with Kernel Gateway.
    """
    environment = {
        k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith(("EG_", "KG_"))
    }
    command = [
        python, "-m", "enterprise_gateway",
        "--EnterpriseGatewayApp.ip=127.0.0.1", "--EnterpriseGatewayApp.port={port}",
        "--EnterpriseGatewayApp.port_retries=0", "--EnterpriseGatewayApp.list_kernels=True",
        *extra_args,
    ]  # fmt: skip
    with _gateway(workdir, "enterprise-gateway.log", command, environment, token="") as server:
        yield server


@contextlib.contextmanager
def _gateway(
    workdir: Path, log_name: str, command: list[str], env: dict[str, str], token: str
) -> Iterator[GatewayServer]:
    """Run a gateway's `command` (`{port}` in it becomes a free port) with runtime files and our kernel spec in
    `workdir`, its output in `workdir / log_name`, until the block ends."""
    port = free_port()
    runtime = workdir / "runtime"
    runtime.mkdir(parents=True, exist_ok=True)
    log = workdir / log_name
    _kernel_spec_without_output_limit(workdir / "data")
    env = {
        **env,
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "JUPYTER_DATA_DIR": str(workdir / "data"),
        "JUPYTER_PATH": str(workdir / "data"),  # before the environment's own kernel specs
    }
    args = [arg.replace("{port}", str(port)) for arg in command]
    with open(log, "wb") as log_file:
        process = subprocess.Popen(args, cwd=workdir, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    server = GatewayServer(url=f"http://127.0.0.1:{port}", token=token, process=process, log=log)
    try:
        _wait_until_listening(server)
        yield server
    finally:
        _stop(process)


def _kernel_spec_without_output_limit(data_dir: Path) -> None:
    """The gateway's `python3` kernels run ipykernel with no send limit on iopub, as our local kernels do.

    A stock kernel's iopub drops what its subscriber (the gateway) has not read once 1,000
    messages wait: on a loaded machine the 10,000-line test lost lines inside the gateway, before
    anything reached our client. The tests are about our client, so the gateway's kernels here
    keep everything; a gateway deployment chooses its own kernels (README, Kernel Gateway).
    """
    launcher = Path(freeact_sub.__file__).parent / "kernels" / "_ipykernel_launcher.py"
    spec = {
        # forked by the tests' fork server, ipykernel imported already (`python launcher -f ...` where it cannot be)
        "argv": module_command(str(launcher), "-f", "{connection_file}"),
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
        "metadata": {"debugger": False},
    }
    folder = data_dir / "kernels" / "python3"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")


def _wait_until_listening(server: GatewayServer, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"the kernel gateway exited:\n{server.log.read_text()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{server.url}/api", headers=server.headers, timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"the kernel gateway did not listen within {timeout} s:\n{server.log.read_text()}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the gateway shuts its kernels down), then kill it and any kernel left, by PID."""
    try:
        kernels = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        kernels = []
    process.terminate()
    try:
        process.wait(15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)
    _, alive = psutil.wait_procs(kernels, timeout=5)
    for kernel in alive:
        with contextlib.suppress(psutil.Error):
            kernel.kill()
    psutil.wait_procs(alive, timeout=5)
