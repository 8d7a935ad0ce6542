"""Hosts and limits on paper: what a profile's `network` list and limits mean, and that a child never widens them."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from freeact_sub import AgentConfig
from freeact_sub.sandbox import BUILT_IN_PROFILES, SandboxProfile, meet, profile_from
from freeact_sub.sandbox.hosts import address_allowed, expand_hosts, host_allowed, hosts_meet
from freeact_sub.sandbox.limits import Limits, parse_bytes


def test_a_host_list_names_hosts_subdomains_networks_and_the_packages_list() -> None:
    hosts = expand_hosts(["packages", "*.GitHub.com.", "10.0.0.0/8", "192.168.1.5"])
    assert hosts == ("pypi.org", "files.pythonhosted.org", "*.github.com", "10.0.0.0/8", "192.168.1.5/32")
    assert host_allowed("api.github.com", hosts) and host_allowed("a.b.github.com", hosts)
    assert not host_allowed("github.com", hosts)  # `*.` is for subdomains only
    assert not host_allowed("evilgithub.com", hosts) and not host_allowed("pypi.org.evil.com", hosts)
    for bad in ("exa mple.com", "**", "*.", "a*.b.com", "http://pypi.org", "pypi.org/simple", "evil.com#pypi.org"):
        with pytest.raises(ValueError):
            expand_hosts([bad])


def test_private_addresses_need_a_listed_network() -> None:
    hosts = expand_hosts(["pypi.org", "10.0.0.0/8"])
    assert address_allowed(ipaddress.ip_address("151.101.0.223"), hosts)
    assert address_allowed(ipaddress.ip_address("10.2.3.4"), hosts)
    for private in ("127.0.0.1", "192.168.0.1", "169.254.169.254", "172.16.0.1", "::1", "fd00::1", "0.0.0.0",
                    "100.64.0.1"):
        assert not address_allowed(ipaddress.ip_address(private), hosts), private


def test_a_profile_takes_hosts_and_limits_and_a_bad_one_names_the_field() -> None:
    profile = AgentConfig(sandbox={"network": ["packages"], "memory": "2GiB", "processes": 64,
                                   "cell_time": 30}).sandbox
    assert profile is not None and profile.hosts == ("pypi.org", "files.pythonhosted.org")
    assert profile.limits == Limits(memory=2 * 1024**3, processes=64, cell_time=30)
    assert profile.detail() == "hosts: pypi.org, files.pythonhosted.org; memory 2 GiB, 64 processes, 30 s a cell"
    assert profile_from({"network": "packages"}).hosts == ("pypi.org", "files.pythonhosted.org")
    assert profile_from({"network": []}).network is False  # no host: no network
    assert parse_bytes("512MB") == 512 * 1000**2 and parse_bytes(1 << 30) == 1 << 30
    with pytest.raises(ValidationError, match=r"sandbox\.network"):
        AgentConfig(sandbox={"network": ["not a host"]})
    with pytest.raises(ValidationError, match=r"memory"):
        AgentConfig(sandbox={"memory": "lots"})
    with pytest.raises(ValidationError, match=r"processes"):
        AgentConfig(sandbox={"processes": 2})


def test_a_child_never_reaches_more_hosts_nor_takes_more_than_its_parent(tmp_path: Path) -> None:
    parent = SandboxProfile(name="parent", network=("*.github.com", "pypi.org"), limits=Limits(memory="2GiB"))
    child = SandboxProfile(name="child", network=("api.github.com", "evil.com", "*.pypi.org"),
                           limits=Limits(memory="4GiB", processes=32, cell_time=10))
    combined = meet(parent, child, tmp_path)
    assert combined.hosts == ("api.github.com",)
    assert combined.limits == Limits(memory=2 * 1024**3, processes=32, cell_time=10)
    assert meet(parent, BUILT_IN_PROFILES["workspace"], tmp_path).hosts == parent.hosts  # `true` asks for no more
    assert meet(BUILT_IN_PROFILES["workspace"], child, tmp_path).hosts == child.hosts
    assert meet(BUILT_IN_PROFILES["offline"], child, tmp_path).network is False
    assert meet(parent, SandboxProfile(name="x", network=("example.com",)), tmp_path).network is False
    assert hosts_meet(("10.0.0.0/8",), ("10.1.0.0/16", "192.168.0.0/16")) == ("10.1.0.0/16",)
    assert hosts_meet(("api.github.com",), ("*.github.com",)) == ("api.github.com",)


def test_the_docs_sandbox_examples_make_the_profiles_they_say() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "sandbox.md").read_text(encoding="utf-8")
    (block,) = [block for block in re.findall(r"```python\n(.*?)```", page, flags=re.S) if "pip-and-github" in block]
    scope: dict[str, object] = {}
    exec(block, scope)
    profile = scope["config"].sandbox  # type: ignore[attr-defined]
    assert profile.hosts == ("pypi.org", "files.pythonhosted.org", "*.github.com")
    assert profile.limits == Limits(memory=2 * 1024**3, processes=64, cell_time=120)


def test_the_terminal_banner_shows_hosts_and_limits() -> None:
    from types import SimpleNamespace

    from freeact_sub.terminal.banner import sandbox_text

    agent = SimpleNamespace(sandbox=profile_from({"name": "net", "network": ["packages"], "memory": "2GiB",
                                                  "cell_time": 60}))
    shown = sandbox_text(agent).plain  # type: ignore[arg-type]
    assert shown.startswith("net (writes: working folder; hosts: pypi.org, files.pythonhosted.org; memory 2 GiB, "
                            "256 processes, 60 s a cell")


def test_a_destination_is_checked_before_its_name_is_resolved() -> None:
    from freeact_sub.sandbox.hosts import destination

    asked: list[str] = []
    answers = {"ok.test": ["93.184.216.34"], "rebound.ok.test": ["93.184.216.34", "10.0.0.7"],
               "inner.ok.test": ["169.254.169.254"], "v6.ok.test": ["::ffff:127.0.0.1"]}

    def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return answers[host]

    hosts = expand_hosts(["ok.test", "*.ok.test"])
    assert destination("OK.TEST.", 443, hosts, resolve) == ["93.184.216.34"]
    assert destination("rebound.ok.test", 443, hosts, resolve) == ["93.184.216.34"]  # the private one is dropped
    for refused in ("inner.ok.test", "v6.ok.test", "evil.test", "ok.test.evil.test", "2130706433", "0x7f.1",
                    "127.0.0.1", "[::1]", "::ffff:127.0.0.1", "ök.test", "ok.test:80", "", "a" * 300):
        verdict = destination(refused, 443, hosts, resolve)
        assert isinstance(verdict, tuple), refused
    assert destination("ok.test", 0, hosts, resolve) == ("ok.test", 0, "not a host name and port")
    assert asked == ["ok.test", "rebound.ok.test", "inner.ok.test", "v6.ok.test"]  # refused names never resolved
    assert destination("10.1.2.3", 80, expand_hosts(["10.0.0.0/8"]), resolve) == ["10.1.2.3"]


def test_network_on_is_the_public_internet_and_private_ranges_only_where_listed() -> None:
    from freeact_sub.sandbox import BUILT_IN_PROFILES, SandboxProfile
    from freeact_sub.sandbox.hosts import destination

    def resolve(host: str, port: int) -> list[str]:
        return {"example.com": ["93.184.215.14"], "intranet.test": ["10.1.2.3"], "metadata.test": ["169.254.169.254"],
                "me.test": ["127.0.0.1"]}[host]

    hosts = tuple(BUILT_IN_PROFILES["workspace"].plan(Path("/nowhere"))["network"])
    assert hosts == ("*",)
    assert destination("example.com", 443, hosts, resolve) == ["93.184.215.14"]
    assert destination("1.1.1.1", 443, hosts, resolve) == ["1.1.1.1"]
    for refused in ("127.0.0.1", "169.254.169.254", "10.0.0.1", "::1", "localhost"):
        assert isinstance(destination(refused, 80, hosts, lambda host, port: ["127.0.0.1"]), tuple), refused
    for name in ("intranet.test", "metadata.test", "me.test"):
        assert isinstance(destination(name, 80, hosts, resolve), tuple), name
    mine = SandboxProfile(name="dev", network=("*", "127.0.0.1"))
    listed = tuple(mine.plan(Path("/nowhere"))["network"])
    assert destination("me.test", 8000, listed, resolve) == ["127.0.0.1"]
    assert destination("127.0.0.1", 8000, listed, resolve) == ["127.0.0.1"]
    assert isinstance(destination("intranet.test", 80, listed, resolve), tuple)


def test_a_host_list_is_parsed_once_not_for_every_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    from freeact_sub.sandbox import hosts as rules

    listed = expand_hosts(["ok.test", "*.ok.test", "10.0.0.0/8", "127.0.0.1", "once.test"])  # a list of its own
    parsed: list[str] = []
    network = rules._network

    def counted(text: str) -> Any:
        parsed.append(text)
        return network(text)

    monkeypatch.setattr(rules, "_network", counted)
    for _ in range(100):
        assert rules.destination("a.ok.test", 443, listed, lambda host, port: ["10.1.2.3", "127.0.0.1"]) == [
            "10.1.2.3",
            "127.0.0.1",
        ]
        assert isinstance(rules.destination("evil.test", 443, listed, lambda host, port: []), tuple)
    assert len(parsed) <= 2 * len(listed), len(parsed)  # the list's entries, once (not 100 connections' worth)


def test_made_up_names_leave_nothing_behind_in_the_checks_caches() -> None:
    """A cell's code writes the names it asks for: a flood of long ones is refused and kept nowhere."""
    import tracemalloc

    from freeact_sub.sandbox.hosts import destination

    listed = expand_hosts(["ok.test", "10.0.0.0/8"])
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for index in range(300):
            made_up = f"{index}:" + "1" * 50_000  # looks like an address to a quick glance (a colon, digits)
            assert isinstance(destination(made_up, 443, listed, lambda host, port: []), tuple)
            assert isinstance(destination(f"[{made_up}]", 443, listed, lambda host, port: []), tuple)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 1 << 20, f"{grown >> 20} MiB kept of what the names were"
