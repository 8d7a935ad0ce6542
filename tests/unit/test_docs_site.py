"""The documentation site builds with `mkdocs build --strict`: a broken link, a page left out of the
navigation, a name the API reference cannot find or an `AgentConfig` field without a docstring fails here.
The one build also checks what a reader of the site needs: where the code is and how to get it, how to
reach the notebooks, an API reference of the public API only, split by concept and cross-linked, a table of
contents on the long pages, and `/llms.txt`.

CI runs only the README's test line, so this is where the site's build runs in CI. The build reads
nothing from the network (no fonts, no social cards), so it works on a fresh offline machine.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import freeact_sub

ROOT = Path(__file__).resolve().parents[2]
API_PAGES = ("agent", "events", "approvals", "types", "usage", "trust", "errors")


class _Loader(yaml.SafeLoader):
    """mkdocs.yml as data; Material's `!!python/name:` tags are not needed here."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    return out


def page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text(encoding="utf-8")


def text_of(markup: str, code: bool = False) -> str:
    """The words of a page's article, without tags (and without its code blocks unless `code`)."""
    article = markup[markup.index("<article") : markup.index("</article>")]
    if not code:
        article = re.sub(r"<pre.*?</pre>", "", article, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", article))


def test_the_site_builds_strictly_and_the_configuration_table_has_every_field(site: Path) -> None:
    reference = page(site, "configuration")
    for field in freeact_sub.AgentConfig.model_fields:  # the table is made from the class, every field of it
        assert f"<code>{field}</code>" in reference, field


def test_every_page_says_where_the_code_is_and_the_quick_start_gets_it_first(site: Path) -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_Loader)
    repo_url, site_url = config["repo_url"], config["site_url"]
    assert repo_url.startswith("https://") and site_url.startswith("https://")
    for name in ("quickstart", "notebook", "acp"):  # Material puts the repository's link in every page's header
        assert f'href="{repo_url}"' in page(site, name), name
    quickstart = page(site, "quickstart")
    assert 'id="get-the-code"' in quickstart
    steps = text_of(quickstart, code=True)
    clone = steps.index(f"git clone {repo_url}.git")
    assert clone < steps.index("pip install"), "the quick start installs before it says where the code is"
    for name in ("acp", "notebook", "quickstart"):  # freeact-sub is not on PyPI: no page installs it by name
        assert "pip install 'freeact-sub" not in text_of(page(site, name)), name
        assert "pip install freeact-sub" not in text_of(page(site, name)), name


def test_the_notebook_page_installs_and_starts_jupyterlab_and_links_every_notebook(site: Path) -> None:
    notebook = page(site, "notebook")
    assert 'id="install-jupyterlab-and-open-the-notebooks"' in notebook
    steps = text_of(notebook, code=True)
    assert "pip install '.[notebook]'" in steps and "jupyter lab notebooks/" in steps
    for shipped in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert re.search(rf'href="[^"]*/notebooks/{re.escape(shipped.name)}"', notebook), shipped.name
    extras = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^notebook = \[\n\s+"jupyterlab', extras, flags=re.M)


def test_the_api_reference_is_split_by_concept_and_shows_each_public_name_once(site: Path) -> None:
    names = [name for name in freeact_sub.__all__ if not name.startswith("_")]
    where: dict[str, list[str]] = {name: [] for name in names}
    for concept in API_PAGES:
        markup = page(site / "api", concept)
        for name in re.findall(r'id="freeact_sub\.(\w+)"', markup):
            assert name in where, f"api/{concept} documents freeact_sub.{name}, which the package does not export"
            where[name].append(concept)
    assert {name: pages for name, pages in where.items() if len(pages) != 1} == {}
    assert not (site / "api.html").exists() and not (site / "api" / "index.html").read_text().count("::: ")


def test_the_api_reference_leaves_out_internals_and_stray_markup(site: Path) -> None:
    agent = page(site / "api", "agent")
    for internal in ("tree", "parts", "turns", "inbox", "conversation", "budgets", "kernel", "own_processes"):
        assert f'id="freeact_sub.Agent.{internal}"' not in agent, internal
    assert 'id="freeact_sub.AgentConfig.make_state_dir"' not in agent
    signature = text_of(agent)[: text_of(agent).index("agent_id")]  # Agent(config, *, agent_id, …)
    assert "tree" not in signature and "spec" not in signature, signature
    for concept in API_PAGES:
        words = text_of(page(site / "api", concept))
        assert not re.search(r"(?<![:\w])::(?![:\w])", words), f"api/{concept} shows a stray '::'"


def test_the_api_reference_links_the_types_in_its_signatures(site: Path) -> None:
    agent = page(site / "api", "agent")
    links = set(re.findall(r'<a class="autorefs[^"]*"[^>]*href="([^"]+)"', agent))
    assert "#freeact_sub.AgentConfig" in links  # Agent(config: AgentConfig)
    assert "../approvals/#freeact_sub.ApprovalPolicy" in links  # another page of the reference
    assert "../events/#freeact_sub.AgentEvent" in links  # stream() yields AgentEvent


@pytest.mark.parametrize(("name", "picture"), [("terminal", "terminal-{}.svg"), ("notebook", "notebook-{}.png")])
def test_the_front_ends_show_their_picture_in_the_readers_theme(site: Path, name: str, picture: str) -> None:
    markup = page(site, name)
    for theme in ("dark", "light"):  # Material shows the one that matches the reader's palette
        assert f'src="../{picture.format(theme)}#only-{theme}"' in markup, theme
        assert (site / picture.format(theme)).stat().st_size > 10_000


@pytest.mark.parametrize("name", ["sandbox", "gateways", "hooks"])
def test_the_long_pages_have_sections_for_a_table_of_contents(site: Path, name: str) -> None:
    headings = re.findall(r"<h2 id=", page(site, name))
    assert len(headings) >= 3, f"{name}: {len(headings)} H2 headings"


def test_llms_txt_lists_every_page_for_readers_who_use_an_agent(site: Path) -> None:
    llms = (site / "llms.txt").read_text(encoding="utf-8")
    assert llms.startswith("# freeact-sub\n")
    for source in sorted((ROOT / "docs").glob("*.md")):
        if source.stem not in ("architecture", "development"):  # the inside of the project is left out
            stem = "" if source.stem == "index" else f"{source.stem}/"
            assert f"/{stem}index.md)" in llms, source.name
    for concept in API_PAGES:
        assert f"/api/{concept}/index.md)" in llms, concept
    full = (site / "llms-full.txt").read_text(encoding="utf-8")
    assert "class Agent" in full or "Agent(" in full


def test_the_site_loads_nothing_from_the_network_when_read() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "font: false" in config  # Material would otherwise link Google Fonts
    assert "social" not in config and "privacy" not in config
