"""The tree of agents as one trace in a real OTLP receiver people use for LLM tracing: Arize Phoenix.

Phoenix pins many packages, so it lives in an environment of its own (`.ci/run` builds it and names its
interpreter in `$FREEACT_SUB_TEST_PHOENIX_PYTHON`); the test starts `phoenix serve` on 127.0.0.1 ports of
its own, runs a tree (a `task`, a background `task`, a cell's `map_tasks` of five) in a fresh process that
exports to it over OTLP/HTTP with the SDK's own providers, then reads the spans back from Phoenix's REST API.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.ci_builds import wait_for_build

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
PHOENIX_PYTHON_ENV = "FREEACT_SUB_TEST_PHOENIX_PYTHON"
PHOENIX_PYTHON = os.environ.get(PHOENIX_PYTHON_ENV, "")

PHOENIX_WAIT = float(os.environ.get("FREEACT_SUB_TEST_PHOENIX_WAIT", "0"))
"""Seconds to wait for the interpreter's environment to be ready (CI builds it while the other tests run)."""


def _phoenix_ready() -> str | None:
    """None when Phoenix's interpreter is there; else why not. Waits up to `PHOENIX_WAIT` for an environment
    `.ci/run` is building (`tests/ci_builds.py`)."""
    if not PHOENIX_PYTHON:
        return f"needs ${PHOENIX_PYTHON_ENV}: an interpreter with arize-phoenix (it pins what this one cannot share)"
    if PHOENIX_WAIT and (why := wait_for_build(Path(PHOENIX_PYTHON).parent.parent, PHOENIX_WAIT, "Phoenix")):
        return f"the environment of ${PHOENIX_PYTHON_ENV}: {why}"
    return None if Path(PHOENIX_PYTHON).exists() else f"${PHOENIX_PYTHON_ENV} names no interpreter: {PHOENIX_PYTHON}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def phoenix() -> Iterator[str]:
    """`phoenix serve` on 127.0.0.1, its data in a temporary folder; stopped (by its PID) when the module ends."""
    if (missing := _phoenix_ready()) is not None:
        pytest.skip(missing)
    with tempfile.TemporaryDirectory() as folder:
        port = _free_port()
        env = {**os.environ, "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
               "PHOENIX_GRPC_PORT": str(_free_port()), "PHOENIX_WORKING_DIR": folder,
               "PHOENIX_TELEMETRY_ENABLED": "false"}
        log = open(Path(folder) / "phoenix.log", "wb")  # closed below, after the process
        server = subprocess.Popen([PHOENIX_PYTHON, "-m", "phoenix.server.main", "serve"], env=env, stdout=log,
                                  stderr=subprocess.STDOUT, cwd=folder)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 180
            while True:
                assert server.poll() is None, (Path(folder) / "phoenix.log").read_text(errors="replace")[-3000:]
                try:
                    if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "Phoenix did not answer within 180 s"
                time.sleep(0.5)
            yield url
        finally:
            server.terminate()
            try:
                server.wait(20)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            log.close()


def _spans(url: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{url}/v1/projects/default/spans", params={"limit": 1000}, timeout=10)
    if answer.status_code == 404:  # no project yet: nothing arrived
        return []
    answer.raise_for_status()
    return list(answer.json()["data"])


def _flat(attributes: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Phoenix may nest dotted attribute names (`{"gen_ai": {"usage": …}}`): back to dotted names."""
    flat: dict[str, Any] = {}
    for key, value in attributes.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


@pytest.fixture(scope="module")
def traced(phoenix: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The tree run once, exporting to Phoenix: the spans Phoenix holds, and the run's own report (usage)."""
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix, "OTEL_SERVICE_NAME": "freeact-sub-test",
           "TMPDIR": os.environ.get("TMPDIR", tempfile.gettempdir())}
    done = subprocess.run([sys.executable, "-m", "tests.telemetry_probe", "tree"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "could not reach" not in done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    deadline = time.monotonic() + 30
    while True:  # Phoenix writes what it received in batches
        spans = _spans(phoenix)
        runs = [s for s in spans if s["name"].startswith("invoke_agent")]
        if len(runs) >= 8 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    return spans, report


def test_the_tree_is_one_trace_in_phoenix_with_every_child_under_its_call(traced) -> None:
    spans, report = traced
    runs = [s for s in spans if s["name"].startswith("invoke_agent")]
    assert len(runs) == 8, [s["name"] for s in spans]
    ids = {s["context"]["span_id"]: s for s in spans}
    assert len({s["context"]["trace_id"] for s in spans}) == 1, "one trace for the run"
    orphans = [s["name"] for s in spans if s.get("parent_id") and s["parent_id"] not in ids]
    assert not orphans, f"spans whose parent Phoenix never received: {orphans}"
    roots = [s for s in spans if not s.get("parent_id")]
    assert len(roots) == 1 and _flat(roots[0]["attributes"])["freeact.agent_id"] == report["main"]
    for run in runs:
        if run is roots[0]:
            continue
        parent = ids[run["parent_id"]]
        assert parent["name"] == "execute_tool task", parent["name"]
    # the tokens of each agent's model requests (pydantic-ai's spans) are the agent's Usage
    tokens: dict[str, list[int]] = {}
    for chat in (s for s in spans if s["name"].startswith("chat ")):
        span = chat
        while not span["name"].startswith("invoke_agent"):
            span = ids[span["parent_id"]]
        attributes = _flat(chat["attributes"])
        mine = tokens.setdefault(_flat(span["attributes"])["freeact.agent_id"], [0, 0])
        mine[0] += int(attributes["gen_ai.usage.input_tokens"])
        mine[1] += int(attributes["gen_ai.usage.output_tokens"])
    assert tokens == report["usage"]


@pytest.mark.browser
def test_phoenix_shows_the_tree_as_one_trace(phoenix: str, traced, tmp_path: Path) -> None:
    """Phoenix's trace view in Chromium: the picture `docs/tracing.md` uses (saved under `test-artifacts/`)."""
    from tests.system_tools import require

    require("chromium", "the Phoenix browser test", "apt-get install -y chromium (Debian's build)")
    from playwright.sync_api import sync_playwright

    spans, _ = traced
    trace_id = spans[0]["context"]["trace_id"]
    projects = httpx.get(f"{phoenix}/v1/projects", timeout=10).json()["data"]
    project = next(p["id"] for p in projects if p["name"] == "default")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                             args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.goto(f"{phoenix}/projects/{project}/traces/{trace_id}", wait_until="networkidle", timeout=120_000)
            page.get_by_text("invoke_agent general").first.wait_for(timeout=60_000)
            page.get_by_text("invoke_agent labeler").first.wait_for(timeout=60_000)
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "phoenix-trace.png"))
        finally:
            browser.close()
