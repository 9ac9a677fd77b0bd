"""net.cidr_merge, net.cidr_contains_matches and net.cidr_intersects, as OPA."""

from __future__ import annotations

import ipaddress
import re
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


def _members(name: str, operand: Any, position: int) -> list[tuple[Any, Any]]:
    """(CIDR term, key) pairs as OPA iterates an operand: a string is its own key, arrays use indices, sets
    their members, objects their keys; an operand of another type has none (no error)."""
    if isinstance(operand, str):
        return [(operand, operand)]
    if isinstance(operand, list):
        return [(_match_term(name, position, v), i) for i, v in enumerate(operand)]
    if isinstance(operand, set | frozenset):
        return [(_match_term(name, position, v), v) for v in operand]
    if isinstance(operand, dict):
        return [(_match_term(name, position, v), k) for k, v in operand.items()]
    return []


def _match_term(name: str, position: int, value: Any) -> Any:
    """A member's CIDR term: the string, or an array's first element, whatever its type (checked only when a
    pair is compared)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and value:
        return value[0]
    raise BuiltinError(f"{name}: operand {position}: element must be string or non-empty array")


def _go_ip(text: str) -> bytes | None:
    """Go's net.ParseIP: 16 bytes (an IPv4 address mapped), None for no address (a zone included)."""
    if "%" in text:
        return None
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    return ip.packed if ip.version == 6 else b"\0" * 10 + b"\xff\xff" + ip.packed


def _go_cidr(name: str, text: Any, position: int) -> tuple[bytes, bytes]:
    """Go's net.ParseCIDR: the network's address (4 bytes for IPv4 text) and its mask."""
    if not isinstance(text, str):
        raise BuiltinError(f"{name}: operand {position} must be string but got {type_name(text)}")
    address, slash, prefix = text.partition("/")
    ip = _go_ip(address)
    v4 = ip is not None and ":" not in address
    size = 32 if v4 else 128
    if ip is None or not slash or not (prefix.isascii() and prefix.isdigit()) or int(prefix) > size:
        raise BuiltinError(f"{name}: invalid CIDR address: {text}")
    ip = ip[12:] if v4 else ip
    mask = ((1 << size) - (1 << (size - int(prefix)))).to_bytes(size // 8, "big")
    return bytes(a & m for a, m in zip(ip, mask, strict=True)), mask


def _go_contains(network: tuple[bytes, bytes], ip: bytes) -> bool:
    """Go's IPNet.Contains: an IPv4-mapped address (network or operand) compares as IPv4."""
    number, mask = network
    if len(number) == 16 and number[:12] == b"\0" * 10 + b"\xff\xff":
        number = number[12:]
    if len(number) == 4 and len(mask) == 16:
        mask = mask[12:]
    if len(ip) == 16 and ip[:12] == b"\0" * 10 + b"\xff\xff":
        ip = ip[12:]
    if len(ip) != len(number) or len(mask) != len(number):
        return False
    return all(n & m == i & m for n, m, i in zip(number, mask, ip, strict=True))


def _cidr_contains(name: str, cidr: Any, cidr_or_ip: Any) -> bool:
    """OPA's net.cidr_contains on one pair: the first a CIDR, the second an address or a CIDR (its first and
    last address inside)."""
    network = _go_cidr(name, cidr, 1)
    if not isinstance(cidr_or_ip, str):
        raise BuiltinError(f"{name}: operand 2 must be string but got {type_name(cidr_or_ip)}")
    ip = _go_ip(cidr_or_ip)
    if ip is not None:
        return _go_contains(network, ip)
    try:
        first, mask = _go_cidr(name, cidr_or_ip, 2)
    except BuiltinError:
        text = f"{name}: not a valid textual representation of an IP address or CIDR: {cidr_or_ip}"
        raise BuiltinError(text) from None
    last = bytes(a | (~m & 0xFF) for a, m in zip(first, mask, strict=True))
    return _go_contains(network, first) and _go_contains(network, last)


@builtin("net.cidr_contains_matches")
def cidr_contains_matches(cidrs: Any, cidrs_or_ips: Any) -> set[tuple[Any, Any]]:
    """OPA's loops: the second operand's members are read for each of the first's (none: never read), and
    each pair compared as net.cidr_contains; any error on the way is the call's."""
    name = "net.cidr_contains_matches"
    outer = _members(name, cidrs, 1)
    inner = _members(name, cidrs_or_ips, 2) if outer else []
    return {(ko, ki) for co, ko in outer for ci, ki in inner if _cidr_contains(name, co, ci)}


@builtin("net.cidr_intersects")
def cidr_intersects(a: Any, b: Any) -> bool:
    name = "net.cidr_intersects"
    first, second = _network(name, a, cidr_only=True), _network(name, b, cidr_only=True)
    return first.version == second.version and first.overlaps(second)  # type: ignore[arg-type]
