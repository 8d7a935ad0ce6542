"""The documentation site builds with `mkdocs build --strict`: a broken link, a page left out of the
navigation, a name the API reference cannot find or an `AgentConfig` field without a docstring fails here.

CI runs only the README's test line, so this is where the site's build runs in CI. The build reads
nothing from the network (no fonts, no social cards), so it works on a fresh offline machine.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import freeact_sub

ROOT = Path(__file__).resolve().parents[2]


def test_the_site_builds_strictly_without_warnings(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=240, env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    reference = (tmp_path / "configuration" / "index.html").read_text(encoding="utf-8")
    for field in freeact_sub.AgentConfig.model_fields:  # the table is made from the class, every field of it
        assert f"<code>{field}</code>" in reference, field
    api = (tmp_path / "api" / "index.html").read_text(encoding="utf-8")
    for name in ("Agent", "AgentConfig", "ApprovalRequest", "ApprovalPolicy", "ConfigError", "timeline"):
        assert re.search(rf'id="freeact_sub\.{name}"', api), name


def test_the_site_loads_nothing_from_the_network_when_read() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "font: false" in config  # Material would otherwise link Google Fonts
    assert "social" not in config and "privacy" not in config
