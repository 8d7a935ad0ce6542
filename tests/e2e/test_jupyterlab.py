"""JupyterLab in a real browser: a person runs the parallel-subagents notebook and answers every agent.

The run is the demo tour: the main agent's cells (one of them calls MCP tools from code, each
call approved from the notebook), then three subagents, one a `reviewer` on the Anthropic protocol.

JupyterLab (from pip) is started on 127.0.0.1 with fresh config, data, runtime and settings
folders and a token, on a copy of `notebooks/parallel_subagents.ipynb` in a temporary folder.
Debian's Chromium, headless and driven by Playwright, opens it, runs all cells, and clicks the
approval buttons the widgets show: the second subagent is answered before the first, and one
action is rejected. Then the same run in JupyterLab's dark theme, and the saved notebook reopened
after its kernel is gone (the static copy of the run shows). Screenshots land in `test-artifacts/`.

A chat test @-mentions the `freeact-sub` persona (Jupyter AI's ACP client starting `freeact-sub acp
--demo`): it asks the person's own `general` subagent to count primes, and the start of that subagent
and then its cell are approved in the chat's permission cards; the answer shows in the chat. It needs
`jupyter-ai-acp-client` (the `jupyter-ai` extra, also in `test`) and is skipped without it.

A second test opens a notebook run headless (nbclient, as papermill and CI do) the way a person
who gets such a file does: not trusted (JupyterLab sanitizes its HTML), then trusted (the widgets
are rebuilt from their saved state), each in the light and the dark theme. One server serves the module.

Needs `/usr/bin/chromium` (`apt-get install chromium`); Playwright's own browser downloads are never used.
Without Chromium the test is skipped, unless the `CI` environment variable is set: then it fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from tests.cli_fork import ForkedKernelManager, kernel_spec_folder
from tests.system_tools import require

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "parallel_subagents.ipynb"
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
# Settings for a test: start the notebook's kernel without asking, keep off-screen cells attached, no news.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none", "autoStartDefaultKernel": True},
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
}
MINUTE = 60_000  # Playwright waits in milliseconds; these limits only turn a hang into a failure


@dataclass
class JupyterLab:
    url: str
    token: str
    root_dir: Path
    process: subprocess.Popen[bytes]
    data_dir: Path
    """The server's `JUPYTER_DATA_DIR`: its notebook signatures (what trusted means) are kept there."""


@pytest.fixture
def chromium() -> Path:
    require("chromium", "the JupyterLab browser test", "apt-get install -y chromium (Debian's build)")
    return CHROMIUM


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterLab]:
    """A fresh JupyterLab server on 127.0.0.1 serving a copy of the notebook; stopped by PID afterwards."""
    tmp_path = tmp_path_factory.mktemp("jupyterlab")
    home = tmp_path / "lab"
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    shutil.copy(NOTEBOOK, notebooks)
    for plugin, values in LAB_SETTINGS.items():
        path = home / "settings" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    # the notebooks' kernels are forked, their libraries imported already (JUPYTER_PATH's specs come first: in a
    # virtual environment, the environment's own come before JUPYTER_DATA_DIR's)
    kernel_spec_folder(home / "specs")
    env = {k: v for k, v in os.environ.items() if k not in ("FREEACT_SUB_AUTO_APPROVE", "OPENAI_API_KEY")}
    env.update(
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
        JUPYTER_PATH=str(home / "specs"),
        FREEACT_SUB_ACP_ARGS="--demo",  # the freeact-sub persona's agent (with the jupyter-ai extra) on the demo
    )
    port, token = _free_port(), secrets.token_hex(16)
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={notebooks}",
        "--ServerApp.terminals_enabled=False", "--LabApp.extension_manager=readonly",
    ]  # fmt: skip
    if os.geteuid() == 0:  # containers run as root; JupyterLab refuses without this
        command.append("--allow-root")
    ARTIFACTS.mkdir(exist_ok=True)
    log = (ARTIFACTS / "jupyterlab-server.log").open("wb")
    process = subprocess.Popen(command, env=env, cwd=notebooks, stdout=log, stderr=subprocess.STDOUT)
    lab = JupyterLab(f"http://127.0.0.1:{port}", token, notebooks, process, home / "data")
    try:
        _wait_until_serving(lab)
        yield lab
    finally:
        started = _descendants(process.pid)
        _stop(lab)
        log.close()
        _, alive = psutil.wait_procs(started, timeout=20)
        assert not alive, f"left running after JupyterLab stopped: {[p.cmdline()[:4] for p in alive]}"


def _descendants(pid: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        return psutil.Process(pid).children(recursive=True)
    return []


def _wait_until_serving(lab: JupyterLab) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if lab.process.poll() is not None:
            code = lab.process.returncode
            raise AssertionError(f"JupyterLab exited with {code}; see test-artifacts/jupyterlab-server.log")
        with contextlib.suppress(OSError):
            urllib.request.urlopen(f"{lab.url}/api/status?token={lab.token}", timeout=2).close()
            return
        time.sleep(0.2)
    raise AssertionError("JupyterLab did not answer within 90 s")


def _stop(lab: JupyterLab) -> None:
    """Shut the server down through its API (it stops its kernels), then make sure its process is gone."""
    request = urllib.request.Request(f"{lab.url}/api/shutdown?token={lab.token}", method="POST")
    with contextlib.suppress(OSError, urllib.error.URLError):
        urllib.request.urlopen(request, timeout=10).close()
    try:
        lab.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        lab.process.terminate()
        try:
            lab.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            lab.process.kill()
            lab.process.wait()


@pytest.fixture
def page(chromium: Path, tmp_path: Path, jupyterlab: JupyterLab) -> Iterator[object]:
    """A page of a fresh headless Chromium profile; the browser is closed afterwards, then the kernels it started."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=str(chromium),
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1400, "height": 1900},
        )
        page = context.pages[0] if context.pages else context.new_page()
        try:
            yield page
        finally:
            with contextlib.suppress(Exception):  # what the page showed last, to see why a test failed
                page.screenshot(path=str(ARTIFACTS / "jupyterlab-last.png"))
            context.close()
            _shut_down_kernels(jupyterlab)  # the server serves the whole module; its kernels end with each test


def scroll_to_top_of(locator) -> None:
    locator.evaluate("element => element.scrollIntoView({block: 'start'})")


def wait_for_a_settled_kernel(lab: JupyterLab, seconds: float = 3.0, notebook: str | None = None) -> None:
    """Wait until the notebook's one kernel is idle and has stayed the same kernel for `seconds` (`notebook`: the
    kernel of that notebook, where the module's server restores others an earlier test opened).

    JupyterLab may replace the kernel it started first while it restores its workspace (seen
    under load: a kernel shut down half a second after its start); cells queued on the first
    kernel are then dropped, and the run never begins.
    """
    deadline = time.monotonic() + 2 * MINUTE / 1000
    settled: tuple[str, float] | None = None
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{lab.url}/api/sessions?token={lab.token}", timeout=10) as response:
            sessions = json.load(response)
        kernels = [s["kernel"] for s in sessions if s.get("kernel") and notebook in (None, s.get("path"))]
        if len(kernels) == 1 and kernels[0].get("execution_state") == "idle":
            kernel_id = kernels[0]["id"]
            if settled is None or settled[0] != kernel_id:
                settled = (kernel_id, time.monotonic())
            elif time.monotonic() - settled[1] >= seconds:
                return
        else:
            settled = None
        time.sleep(0.2)
    raise AssertionError(f"the notebook's kernel did not settle: {sessions}")


def run_all_cells(page, notebook) -> None:
    """Run → Run All Cells, as a person does; retried while JupyterLab is still wiring up the notebook.

    Done when the last code cell is queued or has run: a run whose later cells were dropped
    (the kernel replaced under them) would wait for a panel that never comes.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    last_prompt = notebook.locator(".jp-CodeCell").last.locator(".jp-InputPrompt")
    for _ in range(10):
        notebook.locator(".jp-Cell").first.click()  # the notebook becomes the current widget
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        try:
            expect(last_prompt).to_have_text(re.compile(r"\[(\*|\d+)\]"), timeout=5_000)
            return
        except (AssertionError, PlaywrightTimeout):
            page.keyboard.press("Escape")
    raise AssertionError("Run All Cells did not start the notebook's cells")


def test_approve_parallel_subagents_in_any_order_in_jupyterlab(jupyterlab: JupyterLab, page) -> None:
    from playwright.sync_api import expect

    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.goto(f"{jupyterlab.url}/lab/tree/{NOTEBOOK.name}?token={jupyterlab.token}")
    notebook = page.locator(".jp-NotebookPanel:visible")  # everything below is scoped to the open notebook
    expect(notebook).to_have_count(1, timeout=2 * MINUTE)
    expect(notebook.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_have_count(1, timeout=MINUTE)

    # a click on the open file browser's tab folds the left sidebar away: more room for the notebook
    page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").click()
    wait_for_a_settled_kernel(jupyterlab)
    run_all_cells(page, notebook)

    def buttons(kind: str, agent_id: str):
        return notebook.locator(f"button.freeact-{kind}.freeact-by-{agent_id}:not([disabled])")

    def state(panel):
        return panel.locator(".freeact-state").first

    live = notebook.locator(".freeact-live")  # the widgets; a finished run also has a (hidden) static copy
    main = live.locator(".freeact-panel.freeact-main")
    expect(main).to_have_count(1, timeout=2 * MINUTE)
    main_id = main.locator(".freeact-id").first.inner_text()

    # the main agent's first cell: its code is shown, highlighted, with the three buttons
    expect(buttons("approve", main_id)).to_have_count(1, timeout=2 * MINUTE)
    expect(state(main)).to_have_text("waiting for approval")
    expect(main.locator(".freeact-call.freeact-pending .freeact-code")).to_contain_text("def png(width, height, pixel)")
    expect(buttons("always", main_id)).to_have_text(f"Always approve {main_id}")
    buttons("approve", main_id).click()
    approved = main.locator(".freeact-decision-approved")
    expect(approved).to_have_count(1, timeout=MINUTE)
    # its cell that calls MCP tools as Python functions, then each call it makes, shown inside that cell
    pending = main.locator(".freeact-call.freeact-pending")
    expect(pending.locator(".freeact-code")).to_contain_text("from mcptools.demo import constant", timeout=MINUTE)
    buttons("approve", main_id).click()
    expect(approved).to_have_count(2, timeout=MINUTE)
    for calls in (3, 4):
        expect(pending.locator(".freeact-call-title")).to_have_text("demo_constant", timeout=MINUTE)
        buttons("approve", main_id).click()
        expect(approved).to_have_count(calls, timeout=MINUTE)
    code_cell = main.locator(".freeact-call").filter(has_text="reference values: pi = 3.141593, e = 2.718282")
    expect(code_cell.locator(".freeact-call-title").filter(has_text="demo_constant")).to_have_count(2)
    # its three task calls, one after the other
    expect(buttons("approve", main_id)).to_have_count(3, timeout=MINUTE)
    for left in (2, 1, 0):
        buttons("approve", main_id).first.click()
        expect(buttons("approve", main_id)).to_have_count(left)

    subagents = live.locator(".freeact-panel.freeact-subagent")
    expect(subagents).to_have_count(3, timeout=MINUTE)
    # which panel is whose by what it shows, not by place: a child that starts while task calls still wait goes
    # below them, so the order of the panels is the order the children started in
    found = {
        "reviewer": subagents.filter(has=page.locator(".freeact-type", has_text="reviewer")),
        "first": subagents.filter(has=page.locator(".freeact-call.freeact-pending .freeact-code",
                                                   has_text="sieve = bytearray")),
        "second": subagents.filter(has=page.locator(".freeact-call.freeact-pending .freeact-call-title",
                                                    has_text="demo_constant")),
    }
    for panel in found.values():
        expect(panel).to_have_count(1, timeout=MINUTE)
    first_id, second_id, reviewer_id = (found[name].locator(".freeact-id").first.inner_text()
                                        for name in ("first", "second", "reviewer"))
    first, second, reviewer = (live.locator(f".freeact-panel-{agent_id}") for agent_id in (first_id, second_id,
                                                                                            reviewer_id))
    assert len({main_id, first_id, second_id, reviewer_id}) == 4
    # the typed child on the Anthropic protocol: its header says type, title and model; its rule decides its call
    expect(first.locator(".freeact-type").first).to_have_text("general")
    expect(second.locator(".freeact-type").first).to_have_text("general")
    expect(reviewer.locator(".freeact-type").first).to_have_text("reviewer")
    expect(reviewer.locator(".freeact-description").first).to_have_text("Review the summary")
    expect(reviewer.locator(".freeact-model").first).to_have_text("claude-demo")
    expect(state(reviewer)).to_have_text("done", timeout=MINUTE)
    expect(reviewer.locator(".freeact-rule")).to_contain_text("'demo_word_count': allow (agent type reviewer)")
    expect(reviewer.locator(".freeact-decision-auto")).to_have_count(1)
    # both subagents wait at once, each panel in the main agent's; started while the next task calls waited, a panel
    # goes below those (saying so) rather than under its own call: no waiting card moved under the pointer
    for agent_id in (first_id, second_id):
        expect(main.locator(f".freeact-panel-{agent_id}")).to_have_count(1)
    expect(buttons("approve", first_id)).to_have_count(1, timeout=MINUTE)
    expect(buttons("approve", second_id)).to_have_count(1, timeout=MINUTE)
    expect(state(first)).to_have_text("waiting for approval")
    expect(state(second)).to_have_text("waiting for approval")
    run_header = notebook.locator(".freeact-live .freeact-run-header")
    expect(run_header.locator(".freeact-pending-count")).to_have_text("2 waiting for approval")
    expect(notebook.locator(f".freeact-reason-input.freeact-by-{second_id} textarea")).to_be_visible()
    scroll_to_top_of(live)
    page.screenshot(path=str(ARTIFACTS / "jupyterlab-waiting.png"))
    # the cell still awaits the run: the notebook's kernel indicator says busy, not idle (clicks were handled meanwhile)
    expect(notebook.locator(".jp-Notebook-ExecutionIndicator[data-status='busy']")).to_have_count(1)
    print("status bar while the run waits:", page.locator("#jp-main-statusbar").inner_text().replace("\n", " | "))
    # Copy on a cell the agent ran puts its code on the clipboard (the browser writes it; the kernel cannot)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=jupyterlab.url)
    copy = first.locator(".freeact-call.freeact-pending .freeact-copy-button")
    copy.click()
    expect(copy).to_have_text("Copied")
    code = first.locator(".freeact-call.freeact-pending .freeact-code").inner_text()
    assert page.evaluate("navigator.clipboard.readText()").strip() == code.strip()

    # every badge, the pending count's too, reads at 4.5:1 or more in the light theme and in the dark one
    def badges_read_well(theme: str) -> None:  # measured in one go: the headers are redrawn every second
        badges = ".freeact-pending-count, .freeact-state, .freeact-decision, .freeact-sandbox"
        measured = live.evaluate(f"""run => {{ const contrast = {CONTRAST};
            return [...run.querySelectorAll('{badges}')]
              .filter(e => e.textContent.trim()).map(e => [e.textContent, contrast(e)]); }}""")
        assert len(measured) >= 10, measured
        hard = [f"{text!r}: {ratio:.2f}" for text, ratio in measured if ratio < 4.5]
        assert not hard, f"badges hard to read in {theme}: {hard}"

    badges_read_well("JupyterLab Light")
    choose_theme(page, "JupyterLab Dark")
    badges_read_well("JupyterLab Dark")
    choose_theme(page, "JupyterLab Light")

    # scrolled down to the last subagent, the run header (Stop, pending count) stays in sight
    page.set_viewport_size({"width": 1400, "height": 800})
    deadline = time.monotonic() + 60  # JupyterLab lays itself out again after the resize: later on a busy machine
    while True:
        second.locator(".freeact-call").last.evaluate("element => element.scrollIntoView({block: 'end'})")
        scroller = notebook.locator(".jp-WindowedPanel-outer").bounding_box()
        header = run_header.bounding_box()
        settled = scroller and scroller["y"] >= 0 and scroller["y"] + scroller["height"] <= 801
        if settled or time.monotonic() > deadline:
            break
        page.wait_for_timeout(200)
    clipping = run_header.evaluate(  # what would keep the header from sticking: a scrolling ancestor
        """element => { const found = []; for (let e = element.parentElement; e; e = e.parentElement) {
             const style = getComputedStyle(e);
             if (style.overflow !== 'visible') found.push(e.className + ': ' + style.overflow);
           } return found; }"""
    )
    print("scrolling ancestors:", *clipping, sep="\n  ")
    assert scroller and header and scroller["y"] - 1 <= header["y"] <= scroller["y"] + 5, (scroller, header)
    expect(run_header.locator("button.freeact-stop")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "jupyterlab-sticky-header.png"))

    # at 700 px with the file browser open: the header is one line, Stop keeps its label, the count its words, and
    # no panel runs off the notebook's right edge
    page.set_viewport_size({"width": 700, "height": 800})
    file_browser_tab = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id='filebrowser']")
    file_browser_tab.click()
    expect(page.locator("#filebrowser")).to_be_visible()
    stop = run_header.locator("button.freeact-stop")
    expect(stop).to_have_text("Stop")
    assert stop.evaluate("e => e.scrollWidth <= e.clientWidth"), "Stop's label is cut"
    header, stop_box = run_header.bounding_box(), stop.bounding_box()
    assert header and stop_box and header["height"] < 2 * stop_box["height"], (header, stop_box)
    assert run_header.locator(".freeact-pending-count").evaluate("e => e.getClientRects().length") == 1
    # text too: a subagent's result wraps, the prompt is cut with its ellipsis (both ran past the edge, clipped)
    off_the_edge = live.evaluate("""run => {
        const limit = run.closest('.jp-WindowedPanel-outer').getBoundingClientRect().right + 1;
        const parts = '.freeact-run-header, .freeact-run-header > :not(.freeact-prompt), .freeact-panel, .freeact-call';
        const text = '.freeact-markdown, .freeact-markdown p, .freeact-prompt-text, .widget-html-content';
        return [...run.querySelectorAll(parts + ', .freeact-state, ' + text)]
          .filter(e => e.getBoundingClientRect().right > limit)
          .map(e => `${e.className}: ${Math.round(e.getBoundingClientRect().right)} > ${Math.round(limit)}`); }""")
    page.screenshot(path=str(ARTIFACTS / "jupyterlab-narrow.png"))
    assert not off_the_edge, off_the_edge
    # a sandbox pill too wide for the panel ends in an ellipsis (hover shows it all), never cut mid-letter
    cut = live.evaluate("""run => [...run.querySelectorAll('.freeact-sandbox')]
        .filter(e => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).textOverflow !== 'ellipsis')
        .map(e => e.textContent)""")
    assert not cut, cut
    # the docs' pictures: the run as a person sees it at 700 px, questions waiting, in the light and the dark theme
    file_browser_tab.click()  # folded away: the notebook gets the room
    for theme, name in (("JupyterLab Dark", "dark"), ("JupyterLab Light", "light")):
        choose_theme(page, theme)
        waiting = buttons("approve", first_id)
        expect(waiting).to_have_count(1)
        waiting.evaluate("element => element.scrollIntoView({block: 'center'})")  # a question, under the header
        page.screenshot(path=str(ARTIFACTS / f"notebook-{name}.png"))
        if os.environ.get("FREEACT_SUB_UPDATE_DOCS_PICTURES") == "1":
            shutil.copyfile(ARTIFACTS / f"notebook-{name}.png", ROOT / "docs" / f"notebook-{name}.png")
    # no state pill breaks over two lines (a pill being redrawn after the theme switch has no box for a moment)
    assert live.locator(".freeact-state").evaluate_all("found => found.every(e => e.getClientRects().length <= 1)")
    # each panel's fold control sits at the left of its agent's id, not on a line of its own above it
    beside = live.locator(".freeact-panel-header").evaluate_all("""headers => headers.map(header => {
        const fold = header.querySelector('.freeact-fold').getBoundingClientRect();
        const id = header.querySelector('.freeact-id').getBoundingClientRect();
        return id.top < fold.bottom && id.left > fold.right; })""")
    assert beside and all(beside), beside
    # text of several lines at the notebook's spacing, not a button row's height per line
    spacing = live.locator(".freeact-markdown p").first.evaluate(
        "e => parseFloat(getComputedStyle(e).lineHeight) / parseFloat(getComputedStyle(e).fontSize)")
    assert spacing < 1.8, spacing
    file_browser_tab.click()
    page.set_viewport_size({"width": 1400, "height": 1900})

    # the second subagent before the first: its MCP call, then the first's cell; then reject the second's cell
    expect(second.locator(".freeact-call.freeact-pending .freeact-call-title")).to_have_text("demo_constant")
    buttons("approve", second_id).click()
    buttons("approve", first_id).click()
    pending_cell = second.locator(".freeact-call.freeact-pending .freeact-code")
    expect(pending_cell).to_contain_text("random.seed(7)", timeout=MINUTE)
    # typed key by key at a person's speed while the cell awaits: every key reaches the kernel, not just the first
    message = "Also say which seed you used, please."
    second.locator(".freeact-message-text input").press_sequentially(message, delay=60)
    second.locator("button.freeact-send").click()
    expect(second.locator(".freeact-message")).to_have_text(f"→ message from you: {message}", timeout=MINUTE)
    reason = "Please use the exact value from the MCP tool instead."
    notebook.locator(f".freeact-reason-input.freeact-by-{second_id} textarea").press_sequentially(reason, delay=60)
    buttons("reject", second_id).click()
    expect(second.locator(".freeact-reason")).to_have_text(reason, timeout=MINUTE)

    expect(state(main)).to_have_text("done", timeout=2 * MINUTE)
    expect(state(first)).to_have_text("done")
    expect(state(second)).to_have_text("done")  # rejected with a reason, its turn went on and it answered
    # the whole message is what its model quotes (the reason shown above is the one the kernel handed its model)
    expect(second.locator(".freeact-markdown").last).to_have_text(f"I read your message ('{message}') and finish here.")
    expect(first.locator(".freeact-output")).to_contain_text("RESULT: 17984")
    box = first.locator(".jupyter-widgets.freeact-output-box").filter(has=page.locator("pre.freeact-output")).first
    expect(box).to_have_css("overflow-y", "auto")  # a long output scrolls inside its own box
    assert box.evaluate("element => getComputedStyle(element).maxHeight") != "none"
    # as a cell's lines arrive (each update replaces the <pre> in the box, as the HTML widget does), the box follows
    # the end; once the person scrolled up, it keeps their place instead of jumping back to its top (or the end)
    place = box.evaluate("""box => {
        const copy = box.cloneNode(true); box.after(copy);
        const content = copy.querySelector('.widget-html-content');  // what the HTML widget's update replaces
        const show = count => { content.innerHTML = '<pre class="freeact-pre freeact-output">'
            + Array.from({length: count}, (_, i) => `line ${i + 1}`).join('\\n') + '</pre>'; };
        const pre = () => content.firstElementChild;
        const toEnd = () => Math.round(pre().getBoundingClientRect().bottom - copy.getBoundingClientRect().bottom);
        const lineHeight = () => pre().getBoundingClientRect().height / pre().textContent.split('\\n').length;
        const topLine = () => Math.round((copy.getBoundingClientRect().top - pre().getBoundingClientRect().top)
                                         / lineHeight()) + 1;
        show(5); show(60); const first = toEnd(); show(80); const second = toEnd();
        copy.scrollBy(0, -10 * lineHeight()); const seen = topLine();
        show(100); const after = topLine(); const left = toEnd();
        copy.remove();
        return {first, second, seen, after, left};
    }""")
    assert abs(place["first"]) <= 4 and abs(place["second"]) <= 4, f"the box does not follow the end: {place}"
    assert abs(place["after"] - place["seen"]) <= 1 and place["left"] > 100, f"the person's place was lost: {place}"
    expect(second.locator(".freeact-output")).to_contain_text("3.14159")  # the MCP tool's result
    expect(second.locator(".freeact-decision-rejected")).to_have_count(1)
    answer = main.locator(".freeact-markdown h2").filter(has_text="Results").locator("..")
    expect(answer).to_contain_text("There are 17984 primes below 200,000.")
    expect(answer).to_contain_text(f"I read your message ('{message}')")
    expect(answer).to_contain_text("The summary has 15 words")
    expect(main.locator(".freeact-images img")).to_have_count(1)  # the plot the main agent's kernel drew
    expect(notebook.locator("button.freeact-approve:not([disabled])")).to_have_count(0)
    expect(notebook.locator("button.freeact-stop")).to_be_disabled()
    # the run's timeline under its panels: a lane per agent, children indented, the approval waits drawn
    lanes = live.locator(".fs-timeline .fs-tl-lane")
    expect(lanes).to_have_count(4)
    expect(lanes.first).to_have_attribute("data-agent", main_id)
    expect(live.locator(f".fs-tl-lane[data-agent='{second_id}']")).to_have_attribute("data-depth", "1")
    assert live.locator(".fs-tl-bar[data-state='waiting_for_approval']").count() >= 3

    # the cells after the run: the printed answer and how each subagent ended
    outputs = notebook.locator(".jp-OutputArea-output")
    expect(outputs.filter(has_text=f"{second_id}: done after")).to_have_count(1, timeout=MINUTE)
    expect(outputs.filter(has_text=f"{first_id}: done after 2 turns")).to_have_count(1)
    expect(outputs.filter(has_text=f"{reviewer_id}: done after 2 turns")).to_have_count(1)
    expect(outputs.filter(has_text="## Results")).to_have_count(1)
    expect(notebook.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_have_count(1, timeout=MINUTE)
    scroll_to_top_of(second)
    page.screenshot(path=str(ARTIFACTS / "jupyterlab-done.png"))
    assert not [e for e in errors if "widget" in e.lower()], errors
    expect(notebook.locator(".freeact-static")).to_have_count(1)
    expect(notebook.locator(".freeact-static")).to_be_hidden()  # next to the live widgets, the static copy hides

    # code, badges and borders take the theme's colours: light now, dark after switching
    keyword = main.locator(".freeact-code .fa-k").first
    light = keyword.evaluate("element => getComputedStyle(element).color")
    assert light == "rgb(0, 128, 0)", light  # --jp-mirror-editor-keyword-color of JupyterLab Light
    choose_theme(page, "JupyterLab Dark")
    expect(keyword).to_have_css("color", "rgb(76, 175, 80)")  # the same variable in JupyterLab Dark
    background = main.locator(".freeact-code").first.evaluate("element => getComputedStyle(element).backgroundColor")
    assert background not in ("rgb(245, 245, 245)", "rgb(247, 247, 247)"), background  # not a light grey
    # error text (a failed agent, a failed cell's output) reads at 4.5:1 or more here too
    probes = ('<span class="freeact-error">failed</span>', '<pre class="freeact-pre freeact-output freeact-error">x')
    for probe in probes:
        ratio = main.evaluate(f"""panel => {{ const holder = document.createElement('div');
            holder.innerHTML = '{probe}'; panel.append(holder); const ratio = ({CONTRAST})(holder.firstChild);
            holder.remove(); return ratio; }}""")
        assert ratio >= 4.5, f"error text {probe} reads at {ratio:.2f} in JupyterLab Dark"
    scroll_to_top_of(live)
    page.screenshot(path=str(ARTIFACTS / "jupyterlab-dark.png"))

    # saved, its kernel shut down, reopened: the run shows as its static copy, not as a widget error
    page.keyboard.press("Control+s")
    expect(page.locator(".jp-mod-dirty")).to_have_count(0, timeout=MINUTE)
    _shut_down_kernels(jupyterlab)
    page.reload()
    notebook = page.locator(".jp-NotebookPanel:visible")
    expect(notebook).to_have_count(1, timeout=2 * MINUTE)
    static = notebook.locator(".freeact-static")
    expect(static).to_have_count(1, timeout=MINUTE)
    expect(static).to_be_visible()
    expect(static.locator(".freeact-panel")).to_have_count(4)
    expect(static).to_contain_text("There are 17984 primes below 200,000.")
    expect(static).to_contain_text("RESULT: 17984")
    expect(static.locator("img")).to_have_count(1)
    expect(static.locator("pre.freeact-code").first).to_have_css("padding-left", "6px")  # its own style, not the page's
    expect(static.locator(".fs-timeline .fs-tl-lane")).to_have_count(4)  # the timeline as it was at the end
    expect(notebook.locator(".freeact-live")).to_have_count(0)
    # the widget manager says "model not found" only once the new kernel is up: look after it is
    expect(notebook.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_have_count(1, timeout=MINUTE)
    page.wait_for_timeout(2_000)
    shown = notebook.locator(".jp-Notebook").inner_text()
    assert "Error displaying widget" not in shown and "model not found" not in shown, shown[:1500]
    expect(notebook.get_by_text("Error displaying widget")).to_be_hidden()
    scroll_to_top_of(static)
    page.screenshot(path=str(ARTIFACTS / "jupyterlab-reopened.png"))


def choose_theme(page, theme: str) -> None:
    """Settings → Theme → `theme`, as a person does, and wait until the page wears it."""
    from playwright.sync_api import expect

    page.get_by_role("menuitem", name="Settings", exact=True).click()
    page.locator(".lm-Menu-itemLabel").get_by_text("Theme", exact=True).click()  # opens the submenu
    page.locator(".lm-Menu-itemLabel").get_by_text(theme, exact=True).click()
    expect(page.locator(f"body[data-jp-theme-name='{theme}']")).to_have_count(1, timeout=MINUTE)


def test_the_freeact_sub_persona_answers_in_jupyterlabs_chat_after_its_permission_cards(
    jupyterlab: JupyterLab, page, request: pytest.FixtureRequest
) -> None:
    pytest.importorskip("jupyter_ai_acp_client", reason="the jupyter-ai extra: pip install -e '.[jupyter-ai]'")
    from playwright.sync_api import expect

    body = json.dumps({"type": "file", "format": "text", "content": ""}).encode()
    put = urllib.request.Request(f"{jupyterlab.url}/api/contents/freeact.chat?token={jupyterlab.token}",
                                 data=body, method="PUT", headers={"Content-Type": "application/json"})
    urllib.request.urlopen(put, timeout=10).close()
    page.goto(f"{jupyterlab.url}/lab/tree/freeact.chat?token={jupyterlab.token}")
    chat = page.locator(".jp-chat-messages-container")
    field = page.get_by_placeholder(re.compile("Type a chat message"))
    expect(field).to_be_visible(timeout=2 * MINUTE)
    # the persona joins the chat once Jupyter AI has loaded it: a mention typed before that is plain text
    expect(page.get_by_role("button", name="freeact-sub", exact=True)).to_be_visible(timeout=2 * MINUTE)
    agents_md = jupyterlab.root_dir / "AGENTS.md"  # waits for trust: the chat asks before the first answer
    agents_md.write_text("Answer in full sentences.\n")
    request.addfinalizer(agents_md.unlink)  # the module's other tests run in this folder
    field.click()
    field.fill("@freeact-sub @general Count the prime numbers below 200,000 with a sieve.")
    page.keyboard.press("Escape")  # the mention's completion list
    field.press("Enter")
    expect(chat.get_by_text("Trust this folder's instructions? (AGENTS.md)")).to_be_visible(timeout=3 * MINUTE)
    expect(chat.get_by_text(re.compile("AGENTS.md: instructions in every agent's system prompt"))).to_be_visible()
    chat.get_by_role("button", name="Use them this session").click()  # nothing is remembered in the real HOME

    # the person's own subagent: its start is the main agent's `task` call, asked in a card …
    expect(chat.get_by_text(re.compile(r"Start a subagent \(general\)"))).to_be_visible(timeout=3 * MINUTE)
    chat.get_by_role("button", name="Approve once").click()
    # … then the child's cell, titled with its id and type
    child_cell = chat.get_by_text(re.compile(r"agent-[0-9a-f]{4} \(general\) · Run Python"))
    expect(child_cell).to_be_visible(timeout=2 * MINUTE)
    expect(chat.get_by_text(re.compile(r"\$ import time\s+limit = 200_000"))).to_be_visible()  # the code it approves
    expect(chat.get_by_role("button", name=re.compile(r"Always for agent-[0-9a-f]{4} \(general\)"))).to_be_visible()
    chat.get_by_role("button", name="Approve once").click()
    answer = chat.get_by_role("paragraph").filter(has_text=re.compile(r"There are 17984 primes below 200,000"))
    expect(answer).to_be_visible(timeout=2 * MINUTE)  # the child's answer is the turn's: a message of the persona
    open_sidebar = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
    if open_sidebar.count():  # fold the file browser away (an earlier test of the module may have folded it)
        open_sidebar.click()
    page.screenshot(path=str(ARTIFACTS / "acp-jupyterlab.png"), clip={"x": 0, "y": 0, "width": 1400, "height": 520})


def _shut_down_kernels(lab: JupyterLab) -> None:
    """Shut down every kernel of the server through its REST API (what Kernel → Shut Down does)."""
    with urllib.request.urlopen(f"{lab.url}/api/kernels?token={lab.token}", timeout=10) as response:
        kernels = json.load(response)
    for kernel in kernels:
        request = urllib.request.Request(f"{lab.url}/api/kernels/{kernel['id']}?token={lab.token}", method="DELETE")
        urllib.request.urlopen(request, timeout=30).close()


HEADLESS_CELLS = [
    "from freeact_sub import Agent\nfrom freeact_sub.demo import demo_config, start_demo_server\n"
    "from freeact_sub.notebook import AgentView\n\nserver = start_demo_server()\nagent = Agent(demo_config(server))\n"
    "await agent.start()\nview = AgentView(agent)",
    'await view.run("Add up the numbers from 1 to 100 in one cell.")',
    "await agent.stop()\nserver.close()",
]
CONTRAST = """element => {
  const parse = text => {
    let found = text.match(/rgba?\\(([^)]*)\\)/);
    if (found) { const p = found[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
                 return [p[0], p[1], p[2], p[3] ?? 1]; }
    found = text.match(/color\\(srgb ([^)]*)\\)/);
    if (found) { const p = found[1].split(/[\\s\\/]+/).filter(Boolean).map(Number);
                 return [p[0] * 255, p[1] * 255, p[2] * 255, p[3] ?? 1]; }
    throw new Error('cannot read the colour ' + text);
  };
  const over = (top, bottom) => [0, 1, 2].map(i => top[i] * top[3] + bottom[i] * (1 - top[3])).concat([1]);
  const chain = [];
  for (let e = element; e; e = e.parentElement) chain.unshift(e);
  let background = [255, 255, 255, 1];
  for (const e of chain) background = over(parse(getComputedStyle(e).backgroundColor), background);
  const text = over(parse(getComputedStyle(element).color), background);
  const luminance = c => { const [r, g, b] = c.slice(0, 3).map(v => { v /= 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; }); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const [light, dark] = [luminance(text), luminance(background)].sort((a, b) => b - a);
  return (light + 0.05) / (dark + 0.05);
}"""


def colour(css: str) -> tuple[int, ...]:
    """A computed colour (`rgb(…)`, `rgba(…)` or `color(srgb …)`) as 0–255 channels, to compare two of them."""
    numbers = [float(n) for n in re.findall(r"[\d.]+", css.replace("srgb", ""))]
    scale = 255 if css.startswith("color(") else 1
    return tuple(round(n * scale) for n in numbers[:3])


def run_headless(path: Path) -> None:
    """Run a notebook with nbclient, as papermill and CI pipelines do, and save it with its outputs and widget state."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in HEADLESS_CELLS]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["FREEACT_SUB_AUTO_APPROVE"] = "1"
    NotebookClient(notebook, timeout=180, kernel_name="python3", kernel_manager_class=ForkedKernelManager,
                   resources={"metadata": {"path": str(path.parent)}}).execute(env=env)
    nbformat.write(notebook, path)


def set_theme(lab: JupyterLab, theme: str) -> None:
    """Choose JupyterLab's theme through its settings API (what Settings → Theme saves)."""
    body = json.dumps({"raw": json.dumps({"theme": theme})}).encode()
    request = urllib.request.Request(f"{lab.url}/lab/api/settings/@jupyterlab/apputils-extension:themes", data=body,
                                     method="PUT", headers={"Authorization": f"token {lab.token}",
                                                            "Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=10).close()


def test_a_notebook_run_headless_reads_like_the_live_run_untrusted_and_trusted(jupyterlab: JupyterLab, page) -> None:
    import nbformat
    from nbformat.sign import NotebookNotary
    from playwright.sync_api import expect

    path = jupyterlab.root_dir / "headless-run.ipynb"
    run_headless(path)
    url = f"{jupyterlab.url}/lab/workspaces/headless/tree/{path.name}?token={jupyterlab.token}"

    def open_notebook(theme: str):  # a Playwright locator: the open notebook
        set_theme(jupyterlab, theme)
        page.goto(url)
        expect(page.locator(f"body[data-jp-theme-name='{theme}']")).to_have_count(1, timeout=2 * MINUTE)
        notebook = page.locator(".jp-NotebookPanel:visible")
        expect(notebook.locator(".freeact-static")).to_have_count(1, timeout=MINUTE)
        return notebook

    def check(notebook, name: str, *, trusted: bool) -> None:
        static = notebook.locator(".freeact-static")
        expect(static).to_be_visible()
        scroll_to_top_of(static)
        page.screenshot(path=str(ARTIFACTS / f"jupyterlab-headless-{name}.png"))
        # nothing broken shows: no widget error, no broken-link icon of a widget rebuilt without its kernel
        expect(notebook.get_by_text("Error displaying widget")).to_have_count(0)
        disconnected = notebook.locator(".jupyter-widgets-disconnected")
        assert disconnected.evaluate_all("found => found.filter(e => e.offsetParent !== null).length") == 0
        # styled as the live panels are: an agent panel with its border, badges, highlighted code
        panel = static.locator(".freeact-panel.freeact-main")
        expect(panel).to_have_css("border-left-width", "4px")
        expect(panel).to_have_css("border-top-style", "solid")
        expect(panel.locator("summary")).to_contain_text("main agent")  # a collapsible section per agent
        expect(static.locator(".freeact-state")).to_have_text("done")
        expect(static.locator(".freeact-decision")).to_have_text("auto-approved")
        expect(static).to_contain_text("The sum of 1 to 100 is 5050.")
        # no stray text: the widget's own `text/plain` (shown in its place when untrusted) is empty, and the
        # auto-approve note is said once, by the banner
        shown = notebook.locator(".jp-Notebook").inner_text()
        assert "<freeact-sub run of" not in shown and shown.count("Auto-approve is on") == 1, shown[:2000]
        builtin = static.locator(".freeact-code .fa-nb").first  # `print`, highlighted with the theme's colour
        code = static.locator("pre.freeact-code").first
        theme_colour = page.evaluate("""() => { const probe = document.createElement('span');
            probe.style.color = 'var(--jp-mirror-editor-builtin-color)'; document.body.append(probe);
            const colour = getComputedStyle(probe).color; probe.remove(); return colour; }""")
        assert colour(builtin.evaluate("e => getComputedStyle(e).color")) == colour(theme_colour)
        assert "monospace" in code.evaluate("e => getComputedStyle(e).fontFamily")
        for what, element in [("the auto-approve banner", static.locator(".freeact-banner")),
                              ("the state badge", static.locator(".freeact-state")),
                              ("the decision badge", static.locator(".freeact-decision")),
                              ("a builtin in code", builtin), ("code", code)]:
            ratio = element.evaluate(CONTRAST)
            print(f"{name}: contrast of {what}: {ratio:.2f}")
            assert ratio >= 4.5, f"{what} is hard to read in {name}: contrast {ratio:.2f}"
        # the run's timeline is in the static copy too, its bars placed and in the theme's colours
        expect(static.locator(".fs-timeline .fs-tl-lane")).to_have_count(1)
        bar = static.locator(".fs-tl-bar").first
        assert bar.evaluate("e => getComputedStyle(e).position") == "absolute"
        background = bar.evaluate("e => getComputedStyle(e).backgroundColor")
        assert colour(background) != (0, 0, 0), f"{name}: a timeline bar lost its colour ({background})"
        if not trusted:  # the sanitizer took the <style> block: what shows is the inline styling
            assert notebook.locator(".jp-OutputArea style").count() == 0

    try:
        notebook = open_notebook("JupyterLab Light")
        check(notebook, "untrusted-light", trusted=False)
        notebook = open_notebook("JupyterLab Dark")
        check(notebook, "untrusted-dark", trusted=False)

        # trusted (signed on this machine, as `jupyter trust` does): the widgets come back from their saved state
        signed = nbformat.read(path, as_version=4)
        NotebookNotary(data_dir=str(jupyterlab.data_dir)).sign(signed)
        notebook = open_notebook("JupyterLab Dark")
        expect(notebook.locator(".jp-OutputArea style")).not_to_have_count(0)  # trusted: its <style> is there
        check(notebook, "trusted-dark", trusted=True)
        notebook = open_notebook("JupyterLab Light")
        check(notebook, "trusted-light", trusted=True)
    finally:
        set_theme(jupyterlab, "JupyterLab Light")  # the module's other test starts in the light theme


# -- a child's change set, decided file by file ----------------------------------------------------------------------
# A notebook (written here) runs an agent on a scripted model (`tests/scripting.py`, in the notebook's own kernel):
# the main agent starts a child with `isolation: copy-on-write`, the child's cell changes `report.csv`, adds
# `plot.txt` and removes `old.csv`, and while it ends the person changes `report.csv` in the folder too. The
# `apply_changes` question shows a diff per file with a checkbox, the conflict marked; the person unticks
# `plot.txt` and approves: the removal is applied, the report's version is kept beside the person's (no base to
# merge against), and `plot.txt` stays out. The panel is photographed for docs/isolation.md
# (`test-artifacts/isolation-apply-notebook.png`, copied to `docs/` by hand when it changes). In this module, so that
# it shares the module's JupyterLab server.

CHANGES_SETUP = '''import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from freeact_sub import Agent, AgentConfig
from freeact_sub.notebook import AgentView
from tests.scripting import Call, Router, Script

work = Path({work!r})
work.mkdir(exist_ok=True)
(work / "report.csv").write_text("region,sales\\nnorth,120\\nsouth,95\\n")
(work / "old.csv").write_text("stale\\n")
CHILD = """
open('report.csv', 'a').write('east,143\\\\n')
open('plot.txt', 'w').write('sales by region\\\\n')
import os; os.remove('old.csv')
"""

def meanwhile(messages):  # the person edits the report while the subagent works: a conflict, shown
    text = (work / "report.csv").read_text()
    (work / "report.csv").write_text(text.replace("region,sales", "region,sales_eur"))
    return ["Updated the report."]

main = Script([Call("task", {{"prompt": "EDITOR add the east region", "description": "Add the east region",
                              "isolation": "copy-on-write"}})], ["The report has the east region now."])
router = Router({{"MAIN": main, "EDITOR": Script([Call("execute_ipython_cell", {{"code": CHILD}})], meanwhile)}})
agent = Agent(AgentConfig(model=router.model, working_dir=work, kernel_pool_size=0, mcp_pool_size=0,
                          save_sessions=False))
view = AgentView(agent)'''


def _changes_notebook(path: Path, work: Path) -> None:
    cells = [
        CHANGES_SETUP.format(root=str(ROOT), work=str(work)),
        'await view.run("MAIN update the report")',
        "await agent.stop()",
    ]
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": f"c{n}",
                "metadata": {},
                "outputs": [],
                "source": source,
            }
            for n, source in enumerate(cells)
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(notebook))


def test_a_change_set_is_decided_file_by_file_in_jupyterlab(jupyterlab: JupyterLab, page) -> None:
    from playwright.sync_api import expect

    work = jupyterlab.root_dir / "project"
    _changes_notebook(jupyterlab.root_dir / "changes.ipynb", work)
    page.goto(f"{jupyterlab.url}/lab/tree/changes.ipynb?token={jupyterlab.token}")
    notebook = page.locator(".jp-NotebookPanel:visible")
    expect(notebook).to_have_count(1, timeout=2 * MINUTE)
    # the module's server remembers its workspace: an earlier test may have folded the left sidebar away already
    open_tab = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
    if open_tab.count():
        open_tab.click()
    wait_for_a_settled_kernel(jupyterlab, notebook="changes.ipynb")
    run_all_cells(page, notebook)

    live = notebook.locator(".freeact-live")
    main = live.locator(".freeact-panel.freeact-main")
    expect(main).to_have_count(1, timeout=2 * MINUTE)
    main_id = main.locator(".freeact-id").first.inner_text()
    approve = notebook.locator(f"button.freeact-approve.freeact-by-{main_id}:not([disabled])")
    expect(approve).to_have_count(1, timeout=2 * MINUTE)
    approve.click()  # the task call
    child = live.locator(".freeact-panel.freeact-subagent")
    expect(child).to_have_count(1, timeout=MINUTE)
    child_id = child.locator(".freeact-id").first.inner_text()
    notebook.locator(f"button.freeact-approve.freeact-by-{child_id}:not([disabled])").click()  # its cell

    changes = main.locator(".freeact-changes")
    expect(changes).to_have_count(1, timeout=2 * MINUTE)
    files = changes.locator(".freeact-change-file")
    expect(files).to_have_count(3)
    expect(changes).to_contain_text("it changed in the folder too since the subagent started")
    expect(changes).to_contain_text("+east,143")
    changes.locator(".freeact-change-file").filter(has_text="plot.txt").locator("input").uncheck()
    call = changes.locator("xpath=..")  # the call: its code, the files, the buttons
    call.evaluate("element => element.scrollIntoView({block: 'center'})")  # clear of the run's sticky header
    call.screenshot(path=str(ARTIFACTS / "isolation-apply-notebook.png"))
    approve.click()
    expect(main.locator(".freeact-state").first).to_have_text("done", timeout=2 * MINUTE)
    # the person's edit was made outside any change set, so there is no base to merge against: the folder's version
    # stays, and the child's is kept beside it, named in the result
    assert (work / "report.csv").read_text() == "region,sales_eur\nnorth,120\nsouth,95\n"
    (beside,) = work.glob("report.agent-*.csv")
    assert beside.read_text() == "region,sales\nnorth,120\nsouth,95\neast,143\n"
    assert not (work / "old.csv").exists()
    assert not (work / "plot.txt").exists()  # left out by the person
