"""net.lookup_ip_addr as OPA: the set of addresses a name resolves to (an address resolves to itself).

The system's resolver answers (OPA: Go's, which reads the same /etc/hosts and resolv.conf); a
lookup that fails is a builtin error, as is one not answered within 5 s (OPA waits for the
evaluation's deadline). Addresses are written as Go writes them: an IPv4-mapped IPv6 address as the
IPv4 one; a link-local address with a zone is refused (Go writes the zone's name).
"""

from __future__ import annotations

import concurrent.futures
import ipaddress
import socket
from typing import Any

from regokite.engine.extensions.common import BuiltinError, Refusal, builtin, string_operand

NAME = "net.lookup_ip_addr"
TIMEOUT = 5.0
_resolver = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="lookup-ip-addr")


@builtin(NAME)
def lookup_ip_addr(value: Any) -> set[str]:
    name = string_operand(NAME, value, 1)
    future = _resolver.submit(socket.getaddrinfo, name, None)
    try:
        found = future.result(timeout=TIMEOUT)
    except concurrent.futures.TimeoutError:
        raise BuiltinError(f"{NAME}: lookup {name}: i/o timeout") from None
    except (OSError, UnicodeError):
        raise BuiltinError(f"{NAME}: lookup {name}: no such host") from None
    addresses = set()
    for family, _, _, _, sockaddr in found:
        if family == socket.AF_INET6 and sockaddr[3]:
            raise Refusal(f"{NAME}: {name} resolves to a zoned address, which Go writes with the zone's name")
        address = ipaddress.ip_address(sockaddr[0])
        mapped = getattr(address, "ipv4_mapped", None)
        addresses.add(str(mapped or address))
    return addresses
