"""net.cidr_merge, net.cidr_contains_matches and net.cidr_intersects, as OPA."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from typing import Any

from regokite.engine.extensions.common import BuiltinError, type_name

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


def cidr_merge(addresses: Any) -> set[str]:
    name = "net.cidr_merge"
    if not isinstance(addresses, list | set | frozenset):
        raise BuiltinError(f"{name}: operand 1 must be one of {{array, set}} but got {type_name(addresses)}")
    v4: list[Network] = []
    v6: list[Network] = []
    for address in addresses:
        network = _network(name, address)
        (v4 if network.version == 4 else v6).append(network)
    return {str(n) for group in (v4, v6) for n in ipaddress.collapse_addresses(group)}  # type: ignore[arg-type]


def _keyed(name: str, operand: Any, position: int) -> Iterable[tuple[Any, str]]:
    """(key, cidr) pairs: a string is its own key, arrays use indices, objects their keys."""
    if isinstance(operand, str):
        return [(operand, operand)]
    if isinstance(operand, list):
        return [(i, _first(name, v)) for i, v in enumerate(operand)]
    if isinstance(operand, set | frozenset):
        return [(v, _first(name, v)) for v in operand]
    if isinstance(operand, dict):
        return [(k, _first(name, v)) for k, v in operand.items()]
    raise BuiltinError(
        f"{name}: operand {position} must be one of {{string, array, set, object}} but got {type_name(operand)}"
    )


def _first(name: str, value: Any) -> str:
    if isinstance(value, list | tuple) and value:
        value = value[0]
    if not isinstance(value, str):
        raise BuiltinError(f"{name}: element must be string or non-empty array but got {type_name(value)}")
    return value


def cidr_contains_matches(cidrs: Any, cidrs_or_ips: Any) -> set[tuple[Any, Any]]:
    name = "net.cidr_contains_matches"
    outer = [(k, _network(name, c)) for k, c in _keyed(name, cidrs, 1)]
    inner = [(k, _network(name, c)) for k, c in _keyed(name, cidrs_or_ips, 2)]
    return {
        (ko, ki)
        for ko, o in outer
        for ki, i in inner
        if o.version == i.version and i.subnet_of(o)  # type: ignore[arg-type]
    }


def cidr_intersects(a: Any, b: Any) -> bool:
    name = "net.cidr_intersects"
    first, second = _network(name, a, cidr_only=True), _network(name, b, cidr_only=True)
    return first.version == second.version and first.overlaps(second)  # type: ignore[arg-type]


BUILTINS: dict[str, tuple[int, Callable[..., object]]] = {
    "net.cidr_merge": (1, cidr_merge),
    "net.cidr_contains_matches": (2, cidr_contains_matches),
    "net.cidr_intersects": (2, cidr_intersects),
}
