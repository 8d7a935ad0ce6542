"""Host lists: which names and addresses a kernel may reach through the proxy, and how two lists meet.

A list holds host names (`pypi.org`), wildcards for subdomains (`*.github.com` matches `api.github.com`, not
`github.com`), IP addresses and networks (`10.0.0.0/8`: the only way a private or loopback address is allowed),
and named lists (`packages`). `*` is any name and any public address: what `network = true` means (the host's
loopback, link-local and private ranges only where a network entry lists them). Names are compared lower-case,
without a trailing dot.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable, Iterable

__all__ = ["ANY_PUBLIC", "NAMED_HOST_LISTS", "HostRules", "address_allowed", "destination", "expand_hosts",
           "host_allowed", "host_rules", "hosts_meet", "normalise_host"]

NAMED_HOST_LISTS: dict[str, tuple[str, ...]] = {
    "packages": ("pypi.org", "files.pythonhosted.org"),
}
"""Lists a profile names instead of spelling out: `packages` is what `pip install` reaches on the Python package
index (its simple API and its files)."""

ANY_PUBLIC = "*"
"""The entry for any host name and any public address."""

_LABEL = r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?"
_NAME = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def normalise_host(name: str) -> str | None:
    """`name` lower-case without a trailing dot, or None if it is no plain DNS name (nor an IP address)."""
    name = name.strip().lower()
    if name.endswith("."):
        name = name[:-1]
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if (literal := _ip(name)) is not None:
        return str(literal)
    return name if len(name) <= 253 and _NAME.match(name) else None


def expand_hosts(entries: Iterable[str]) -> tuple[str, ...]:
    """The entries of a profile's `network` list, named lists spelt out and each one checked (ValueError)."""
    found: list[str] = []
    for entry in entries:
        if not isinstance(entry, str):
            raise ValueError(f"a network host is a string, not {type(entry).__name__}")
        entry = entry.strip().lower()
        if entry == ANY_PUBLIC:
            found.append(entry)
            continue
        if entry in NAMED_HOST_LISTS:
            found.extend(NAMED_HOST_LISTS[entry])
            continue
        if _network(entry) is not None:
            found.append(str(_network(entry)))
            continue
        name = entry[2:] if entry.startswith("*.") else entry
        if normalise_host(name) is None or "*" in name:
            raise ValueError(f"{entry!r} is not a host name, `*.domain`, an IP address or network, nor one of "
                             f"the named lists ({', '.join(NAMED_HOST_LISTS)})")
        found.append(("*." if entry.startswith("*.") else "") + (normalise_host(name) or name))
    return tuple(dict.fromkeys(found))


def host_allowed(host: str, hosts: Iterable[str]) -> bool:
    """Whether the (normalised) name `host` matches an entry: the same name, or a subdomain of a `*.` entry."""
    for entry in hosts:
        if entry == ANY_PUBLIC:
            return True
        if entry.startswith("*."):
            if host.endswith(entry[1:]) and len(host) > len(entry) - 1:
                return True
        elif entry == host:
            return True
    return False


def address_allowed(address: Address, hosts: Iterable[str]) -> bool:
    """Whether `address` may be connected to: a public address, or one inside a network the list names."""
    if any(address in network for entry in hosts if (network := _network(entry)) is not None
           and network.version == address.version):
        return True
    return address.is_global and not address.is_multicast


def _covers(wide: str, narrow: str) -> bool:
    """Whether every host `narrow` allows, `wide` allows too."""
    wide_net, narrow_net = _network(wide), _network(narrow)
    if wide_net is not None or narrow_net is not None:
        return (wide_net is not None and narrow_net is not None and wide_net.version == narrow_net.version
                and narrow_net.subnet_of(wide_net))  # type: ignore[arg-type]
    if wide == narrow:
        return True
    if wide == ANY_PUBLIC:
        return narrow != ANY_PUBLIC  # every name (a network entry, private ranges, it does not cover: above)
    if wide.startswith("*."):
        return narrow.endswith(wide[1:])
    return False


def hosts_meet(parent: bool | tuple[str, ...], child: bool | tuple[str, ...]) -> bool | tuple[str, ...]:
    """What a child may reach: never more than its parent. `True` is anywhere, `False` nowhere; two lists meet in
    the entries one allows that the other covers (`*.github.com` and `api.github.com` meet in `api.github.com`)."""
    if parent is False or child is False:
        return False
    if parent is True:
        return child
    if child is True:
        return parent
    kept = [entry for entry in child if any(_covers(other, entry) for other in parent)]
    kept += [entry for entry in parent if entry not in kept and any(_covers(other, entry) for other in child)]
    return tuple(kept) or False


_IPV4_CHARACTERS = frozenset("0123456789.")


_LONGEST_ADDRESS = 64
"""No IP address is written longer (an IPv6 one with a zone included): what is longer is not parsed, nor kept."""


def _ip(text: str) -> Address | None:
    # a name is neither: `ipaddress` would raise twice (IPv4, then IPv6) to say so, ~25 us a connection
    if len(text) > _LONGEST_ADDRESS or (":" not in text and not _IPV4_CHARACTERS.issuperset(text)):
        return None
    return _parsed_ip(text)


@functools.lru_cache(maxsize=1024)  # the addresses names resolve to come again and again; short texts only
def _parsed_ip(text: str) -> Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _network(text: str) -> Network | None:
    if not any(char.isdigit() for char in text) or not (":" in text or "/" in text or _ip(text) is not None):
        return None
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def destination(raw_host: str, port: int, hosts: tuple[str, ...],
                resolve: Callable[[str, int], list[str]]) -> list[str] | tuple[str, int, str]:
    """The addresses a connection to `raw_host:port` may go to, or (host, port, why not).

    The name is checked before it is resolved (a refused name is never looked up); an IP literal needs a listed
    network; of the addresses a name resolves to, only public ones and those in a listed network are kept.
    """
    return host_rules(hosts).destination(raw_host, port, resolve)


class HostRules:
    """A host list made ready for checking connections: its names, wildcard suffixes and networks parsed once
    (`host_rules`), not for every connection."""

    def __init__(self, hosts: tuple[str, ...]) -> None:
        self.hosts = hosts
        self._any_public = ANY_PUBLIC in hosts
        self._names = frozenset(hosts)
        self._suffixes = tuple(entry[1:] for entry in hosts if entry.startswith("*."))
        self._networks = tuple(network for entry in hosts if (network := _network(entry)) is not None)
        """What a resolved address may be in (an entry such as `127.0.0.1` counts)."""
        self._literal_networks = tuple(network for entry in hosts if "/" in entry
                                       and (network := _network(entry)) is not None)
        """What an IP literal in a request may be in: only entries written as networks (`expand_hosts` writes every
        address so)."""
        self._listed = _listed(hosts)

    def host_allowed(self, host: str) -> bool:
        """Whether the (normalised) name `host` matches an entry: the same name, or a subdomain of a `*.` entry."""
        if self._any_public or host in self._names:
            return True
        return any(host.endswith(suffix) and len(host) > len(suffix) for suffix in self._suffixes)

    def address_allowed(self, address: Address) -> bool:
        """Whether `address` may be connected to: a public address, or one inside a network the list names."""
        if any(network.version == address.version and address in network for network in self._networks):
            return True
        return _public(address)

    def destination(self, raw_host: str, port: int,
                    resolve: Callable[[str, int], list[str]]) -> list[str] | tuple[str, int, str]:
        """See `destination`."""
        host = normalise_host(raw_host)
        if host is None or not 0 < port < 65536:
            return raw_host[:100], port, "not a host name and port"
        literal = _ip(host)
        if literal is not None:
            public = self._any_public and _public(literal)
            if not public and not any(network.version == literal.version and literal in network
                                      for network in self._literal_networks):
                return host, port, f"an IP address the profile does not list (it allows {self._listed})"
            return [str(literal)]
        if not self.host_allowed(host):
            return host, port, f"not a host the profile allows (it allows {self._listed})"
        try:
            addresses = resolve(host, port)
        except OSError as exc:
            return host, port, f"it does not resolve ({exc})"
        allowed = [address for address in addresses
                   if (ip := _ip(address)) is not None and self.address_allowed(ip)]
        if not allowed:
            return host, port, (f"it resolves to {', '.join(addresses) or 'nothing'}: private addresses are refused "
                                "unless the profile lists their network")
        return allowed


@functools.lru_cache(maxsize=64)
def host_rules(hosts: tuple[str, ...]) -> HostRules:
    """The rules of `hosts`, made once per list (every kernel of a profile shares them)."""
    return HostRules(hosts)


@functools.lru_cache(maxsize=1024)
def _public(address: Address) -> bool:
    # `is_global` walks a table of reserved networks: a few microseconds an address, and a host has few
    return address.is_global and not address.is_multicast


def _listed(hosts: tuple[str, ...]) -> str:
    if ANY_PUBLIC in hosts:
        return "public addresses" + "".join(f", {entry}" for entry in hosts if entry != ANY_PUBLIC)
    return "only " + ", ".join(hosts) if hosts else "no host"
