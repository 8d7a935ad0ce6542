"""The JSON tool definitions (top-level `tools/`) ship inside the wheel and load from the installed package.

The wheel is built from this source tree and installed (without dependencies) into a fresh
virtual environment. The dependencies come from the test environment's site-packages, added
through a `.pth` path entry: `.pth` files inside that folder are not processed, so the
editable install of this project there (which points at the source tree) stays invisible,
and the check runs in a temporary folder so the source tree is not on the path either.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("execute_ipython_cell", "reset_kernel", "task")

CHECK = """
import json, sys
import freeact_sub
from freeact_sub.tools import Toolbox, builtin_tool, definitions_dir
specs = [builtin_tool(name) for name in {tools!r}]
print(json.dumps({{
    "package": freeact_sub.__file__,
    "version": freeact_sub.__version__,
    "tool_files": [str(definitions_dir().joinpath(name + ".json")) for name in {tools!r}],
    "definitions": [
        {{"name": d.name, "description": d.description, "parameters": d.parameters_json_schema}}
        for d in Toolbox(specs).definitions()
    ],
    "path": sys.path,
}}))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    build = [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)]
    try:
        import hatchling  # noqa: F401

        build.insert(4, "--no-isolation")  # the backend is installed: no need to fetch it
    except ImportError:
        pass
    subprocess.run(build, check=True, capture_output=True, text=True, timeout=300)
    (wheel,) = out.glob("freeact_sub-*.whl")
    return wheel


def test_the_wheel_contains_the_tool_definitions(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for tool in TOOLS:
            member = f"freeact_sub/tools/definitions/{tool}.json"
            assert member in names
            shipped = json.loads(archive.read(member))
            source = json.loads((ROOT / "tools" / f"{tool}.json").read_text(encoding="utf-8"))
            assert shipped == source


def test_the_source_tree_loads_the_top_level_tool_definitions() -> None:
    """In this (editable) install the definitions come from `tools/`, the one source of truth."""
    from freeact_sub.tools import definitions_dir

    assert Path(str(definitions_dir())) == ROOT / "tools"
    assert not (ROOT / "freeact_sub" / "tools" / "definitions").exists()


def test_the_installed_package_loads_its_tool_definitions(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )
    (site / "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    done = subprocess.run(
        [str(python), "-c", CHECK.format(tools=TOOLS)],
        cwd=workdir, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)

    assert Path(report["package"]).is_relative_to(site)
    assert str(ROOT) not in report["path"]
    for file in report["tool_files"]:
        assert Path(file).is_relative_to(site / "freeact_sub" / "tools" / "definitions")
    assert report["version"] == wheel.name.split("-")[1]  # the installed distribution's metadata is found
    for tool, definition in zip(TOOLS, report["definitions"], strict=True):
        source = json.loads((ROOT / "tools" / f"{tool}.json").read_text(encoding="utf-8"))
        assert definition == {
            "name": source["name"],
            "description": source["description"],
            "parameters": source["parameters"],
        }
