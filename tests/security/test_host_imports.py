"""The host imports nothing an agent's kernel wrote (issue 39, item 7).

A program that runs an agent, like a notebook's kernel, imports from its working folder first. One agent under
`workspace` is started in a folder that is on this process's `sys.path` (as `''` is for a notebook), beside a
module of the person's written before it started; its kernel then plants modules there the way an attacker
would. Each planted module, when it runs, leaves a marker file: the host must refuse it (and so leave no
marker), name the file and say how to trust it. Without the guard each of them ran (see the last test, which
runs one in a Python that does not guard its imports).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

import freeact_sub
from freeact_sub import Agent, UntrustedModuleError
from freeact_sub.sandbox import platform_problem
from tests.scripting import Script, single_agent_config

pytestmark = pytest.mark.skipif(platform_problem() is not None, reason=f"no sandbox here: {platform_problem()}")

PERSON = 'WHO = "person"\n'

PLANT = r"""
import importlib._bootstrap_external as external, os, site, sys, sysconfig
marker = {marker!r}
ran = f"open({{marker!r}} + '-' + __name__, 'w').write('ran')\n"
open("planted_mod.py", "w").write(ran)
os.makedirs("planted_pkg", exist_ok=True)
open("planted_pkg/__init__.py", "w").write(ran)
with open("person_changed.py", "a") as changed:
    changed.write(ran)
source = os.stat("person_untouched.py")
code = compile('WHO = "kernel"\n' + ran, os.path.abspath("person_untouched.py"), "exec")
os.makedirs("__pycache__", exist_ok=True)
with open(external.cache_from_source("person_untouched.py"), "wb") as cached:
    cached.write(external._code_to_timestamp_pyc(code, source.st_mtime, source.st_size))
os.symlink(os.path.abspath("person_old.py"), "planted_link.py")
open("planted_trusted.py", "w").write('WHO = "trusted"\n')
open("planted_next_run.py", "w").write(ran)
open("planted.pth", "w").write(f"import os; open({{marker!r}} + '-pth', 'w').write('ran')\n")
refused, folders = [], {{site.getusersitepackages(), sysconfig.get_paths()["purelib"]}}
for folder in folders:
    try:
        os.makedirs(folder, exist_ok=True)  # the person's user site may not exist yet
        open(os.path.join(folder, "planted.pth"), "w").write("import os\n")
    except OSError as exc:
        refused.append(type(exc).__name__)
print("PLANTED", f"site folders refused: {{len(refused)}} of {{len(folders)}}")
"""


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The working folder, on `sys.path` first, with the person's modules written before any agent started."""
    folder = tmp_path_factory.mktemp("host-imports")
    for name in ("person_untouched", "person_changed", "person_old", "person_edited"):
        (folder / f"{name}.py").write_text(PERSON)
    time.sleep(2.1)  # older than the window's margin for a coarse clock
    sys.path.insert(0, str(folder))
    try:
        yield folder
    finally:
        sys.path.remove(str(folder))
        for name in [name for name in sys.modules if name.startswith(("planted", "person_"))]:
            del sys.modules[name]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def planted(work: Path) -> AsyncIterator[str]:
    """An agent whose kernel planted the modules; what its cell printed."""
    async with Agent(single_agent_config(Script(), work, sandbox="workspace")) as agent:
        assert agent.kernel is not None
        result = await agent.kernel.execute(PLANT.format(marker=str(work / "marker")), timeout=60)
        assert "PLANTED" in result.text, result.text
        yield result.text


def _ran(work: Path) -> list[str]:
    return sorted(path.name for path in work.glob("marker-*"))


@pytest.mark.parametrize("name", ["planted_mod", "planted_pkg", "person_changed", "planted_link"])
def test_a_module_the_kernel_wrote_or_changed_is_refused(work: Path, planted: str, name: str) -> None:
    with pytest.raises(UntrustedModuleError) as refused:
        __import__(name)
    assert name not in sys.modules
    assert not _ran(work), f"planted code ran in the host: {_ran(work)}"
    message = str(refused.value)
    assert str(work) in message and "freeact_sub.trust_module(" in message


def test_the_persons_own_modules_still_import(work: Path, planted: str) -> None:
    import person_old  # type: ignore[import-not-found]

    assert person_old.WHO == "person"


def test_a_pyc_the_kernel_wrote_for_the_persons_module_is_not_used(work: Path, planted: str) -> None:
    import person_untouched  # type: ignore[import-not-found]

    assert person_untouched.WHO == "person"  # compiled from the person's source, not the kernel's bytecode
    assert not _ran(work)


def test_trusting_a_file_lets_that_content_in_and_no_other(work: Path, planted: str) -> None:
    with pytest.raises(UntrustedModuleError):
        import planted_trusted  # type: ignore[import-not-found]
    freeact_sub.trust_module(work / "planted_trusted.py")
    import planted_trusted

    assert planted_trusted.WHO == "trusted"
    del sys.modules["planted_trusted"]
    (work / "planted_trusted.py").write_text('WHO = "changed after the trust"\n')
    with pytest.raises(UntrustedModuleError):
        import planted_trusted


def test_the_persons_edit_while_an_agent_runs_waits_for_trust(work: Path, planted: str) -> None:
    (work / "person_edited.py").write_text('WHO = "edited"\n')  # nothing tells this from a kernel's write
    with pytest.raises(UntrustedModuleError):
        import person_edited  # type: ignore[import-not-found]
    freeact_sub.trust_module(work / "person_edited.py")
    import person_edited

    assert person_edited.WHO == "edited"


def test_pth_files_run_nowhere(work: Path, planted: str) -> None:
    """A `.pth` runs only from a site-packages folder, which a kernel cannot write; in the working folder it's inert."""
    assert "site folders refused: 2 of 2" in planted, planted
    subprocess.run([sys.executable, "-c", "import sys"], cwd=work, check=True, timeout=60)
    assert not (work / "marker-pth").exists()


def test_a_later_process_that_guards_its_imports_refuses_it_too(work: Path, planted: str) -> None:
    guarded = "import freeact_sub; freeact_sub.guard_imports(); import planted_next_run"
    run = subprocess.run([sys.executable, "-c", guarded], cwd=work, capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "UntrustedModuleError" in run.stderr, run.stderr
    assert not _ran(work)
    # the attack itself: a Python that does not guard its imports runs what the kernel wrote
    subprocess.run([sys.executable, "-c", "import planted_next_run"], cwd=work, check=True, timeout=60)
    assert _ran(work) == ["marker-planted_next_run"]
    os.remove(work / "marker-planted_next_run")


NOTEBOOK_AGENT = """
import freeact_sub.notebook, freeact_sub
from freeact_sub.sandbox.import_guard import guarded
print("GUARDED", guarded())  # by importing the notebook front end, before any agent started
from freeact_sub import Agent, AgentConfig
from pydantic_ai.models.test import TestModel
agent = Agent(AgentConfig(model=TestModel(), working_dir=".", sandbox="workspace", enable_subagents=False,
                          kernel_pool_size=0, mcp_pool_size=0))
await agent.start()
await agent.kernel.execute("open('nb_planted.py', 'w').write(\\"open('marker-nb', 'w').write('ran')\\")", timeout=60)
await agent.stop()
import nb_person
print("PERSON", nb_person.WHO)
try:
    import nb_planted
except freeact_sub.UntrustedModuleError as refused:
    print("REFUSED", refused.path)
"""


async def test_a_notebook_refuses_what_its_agent_wrote(tmp_path: Path) -> None:
    """The notebook's kernel is the host in JupyterLab; it imports from the notebook's folder first."""
    from tests.integration.notebook_kernel import NotebookKernel

    (tmp_path / "nb_person.py").write_text(PERSON)
    written = time.monotonic()
    env = {name: value for name, value in os.environ.items() if name != "FREEACT_SUB_AUTO_APPROVE"}
    async with NotebookKernel(tmp_path, env, forked=False) as notebook:  # a fresh kernel: where it imports from
        await asyncio.sleep(max(0.0, written + 2.1 - time.monotonic()))  # older than the window's margin
        printed = await notebook.run(NOTEBOOK_AGENT)
    assert printed.startswith("GUARDED True\n"), printed
    assert f"PERSON person\nREFUSED {tmp_path / 'nb_planted.py'}" in printed, printed
    assert (tmp_path / "nb_planted.py").exists() and not (tmp_path / "marker-nb").exists()
