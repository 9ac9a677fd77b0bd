"""net.cidr_merge, net.cidr_contains_matches and net.cidr_intersects, as OPA."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import Any

from regokite.engine.extensions.common import BuiltinError, builtin, type_name

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _network(name: str, text: Any, *, cidr_only: bool = False) -> Network:
    if not isinstance(text, str):
        raise BuiltinError(f"{name}: operand must be string but got {type_name(text)}")
    if cidr_only and "/" not in text:
        raise BuiltinError(f"{name}: invalid CIDR address: {text}")
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        kind = "CIDR address" if "/" in text else "IP address"
        raise BuiltinError(f"{name}: invalid {kind}: {text}") from None


def _merge_entry(name: str, text: Any) -> tuple[Network, str]:
    """A network and how OPA prints it unmerged: a bare IPv4 address takes its
    classful mask and keeps its host bits ("10.1.2.3" is "10.1.2.3/8")."""
    if not isinstance(text, str):
        raise BuiltinError(f"{name}: element must be string")
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        if not re.fullmatch(r"[^/]+/\d{1,3}", text):
            raise BuiltinError(f"{name}: invalid CIDR address: {text}") from None
        network = _network(name, text)
        return network, str(network)
    ip4 = ip if isinstance(ip, ipaddress.IPv4Address) else ip.ipv4_mapped
    if ip4 is None:
        raise BuiltinError(f"{name}: IPv6 invalid: needs prefix length")
    bits = 8 if ip4.packed[0] < 0x80 else 16 if ip4.packed[0] < 0xC0 else 24
    return ipaddress.ip_network(f"{ip4}/{bits}", strict=False), f"{ip4}/{bits}"


@builtin("net.cidr_merge")
def cidr_merge(addresses: Any) -> set[str]:
    """OPA's merge: ranges sorted by last then first address (as bytes), each
    folded into its predecessor when they touch or overlap."""
    name = "net.cidr_merge"
    if not isinstance(addresses, list | set | frozenset):
        raise BuiltinError(f"{name}: operand must be an array")
    ranges: list[tuple[bytes, bytes, str | None]] = []
    for address in addresses:
        network, label = _merge_entry(name, address)
        ranges.append((network.network_address.packed, network.broadcast_address.packed, label))
    ranges.sort(key=lambda r: (r[1], r[0]))
    i = len(ranges) - 1
    while i > 0:
        first, last, _ = ranges[i]
        before_first, before_last, _ = ranges[i - 1]
        if len(first) == len(before_last) and _previous(first) <= before_last:
            ranges[i - 1] = (min(first, before_first), last, None)
            del ranges[i]
        i -= 1
    merged = set()
    for first, last, label in ranges:
        if label is not None:
            merged.add(label)
        else:
            start, end = ipaddress.ip_address(first), ipaddress.ip_address(last)
            merged.update(str(n) for n in ipaddress.summarize_address_range(start, end))  # type: ignore[arg-type]
    return merged


def _previous(address: bytes) -> bytes:
    value = int.from_bytes(address, "big")
    return (value - 1).to_bytes(len(address), "big") if value else address


def _keyed(name: str, operand: Any) -> Iterable[tuple[Any, str]]:
    """(key, cidr) pairs: a string is its own key, arrays use indices, objects their keys."""
    if isinstance(operand, str):
        return [(operand, operand)]
    if isinstance(operand, list):
        return [(i, _first(name, v)) for i, v in enumerate(operand)]
    if isinstance(operand, set | frozenset):
        return [(v, _first(name, v)) for v in operand]
    if isinstance(operand, dict):
        return [(k, _first(name, v)) for k, v in operand.items()]
    return []  # OPA matches nothing in an operand of another type


def _first(name: str, value: Any) -> str:
    if isinstance(value, list | tuple) and value:
        value = value[0]
    if not isinstance(value, str):
        raise BuiltinError(f"{name}: element must be string or non-empty array but got {type_name(value)}")
    return value


@builtin("net.cidr_contains_matches")
def cidr_contains_matches(cidrs: Any, cidrs_or_ips: Any) -> set[tuple[Any, Any]]:
    name = "net.cidr_contains_matches"
    outer = list(_keyed(name, cidrs))
    if not outer:  # OPA reads the second operand for each of the first's: none, nothing read (no error)
        return set()
    inner = list(_keyed(name, cidrs_or_ips))
    if not inner:  # and parses each pair's CIDRs: none to compare, nothing parsed
        return set()
    outer = [(k, _network(name, c)) for k, c in outer]
    inner = [(k, _network(name, c)) for k, c in inner]
    return {
        (ko, ki)
        for ko, o in outer
        for ki, i in inner
        if o.version == i.version and i.subnet_of(o)  # type: ignore[arg-type]
    }


@builtin("net.cidr_intersects")
def cidr_intersects(a: Any, b: Any) -> bool:
    name = "net.cidr_intersects"
    first, second = _network(name, a, cidr_only=True), _network(name, b, cidr_only=True)
    return first.version == second.version and first.overlaps(second)  # type: ignore[arg-type]
