"""The string formats the API server checks in a custom resource, those regokite checks the same way.

The API server validates a string against its schema's `format` only for the
formats CRDs support (others are ignored); of those, these are checked here.
The rest (`email`, `uri`, `hostname`, `mac`, `isbn*`, `creditcard`, `rgbcolor`,
`duration`) are refused in a schema (`schema.parse`), never silently skipped.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import ipaddress
import re
from collections.abc import Callable

_UUID = r"[0-9a-f]{8}-?[0-9a-f]{4}-?%s[0-9a-f]{3}-?%s[0-9a-f]{3}-?[0-9a-f]{12}"
_SHORT_NAME = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})?", re.IGNORECASE)


def _matches(pattern: str, flags: int = 0) -> Callable[[str], bool]:
    compiled = re.compile(pattern, flags)
    return lambda text: compiled.fullmatch(text) is not None


def _ip(version: int) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        try:
            return ipaddress.ip_address(text).version == version or (version == 6 and ":" in text)
        except ValueError:
            return False

    return check


def _cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return "/" in text


def _byte(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return re.fullmatch(r"\d{4}-\d{2}-\d{2}", text) is not None


def _datetime(text: str) -> bool:
    found = _DATETIME.fullmatch(text)
    if found is None:
        return False
    year, month, day, hour, minute, second = (int(found.group(i)) for i in range(1, 7))
    try:
        datetime.datetime(year, month, day, hour, minute, second)
    except ValueError:
        return False
    return True


def _long_name(text: str) -> bool:
    return len(text) <= 253 and all(re.fullmatch(_SHORT_NAME, part) for part in text.split("."))


FORMATS: dict[str, Callable[[str], bool]] = {
    "uuid": _matches(_UUID % ("[0-9a-f]", "[0-9a-f]"), re.IGNORECASE),
    "uuid3": _matches(_UUID % ("3", "[0-9a-f]"), re.IGNORECASE),
    "uuid4": _matches(_UUID % ("4", "[89ab]"), re.IGNORECASE),
    "uuid5": _matches(_UUID % ("5", "[89ab]"), re.IGNORECASE),
    "ipv4": _ip(4),
    "ipv6": _ip(6),
    "cidr": _cidr,
    "byte": _byte,
    "date": _date,
    "datetime": _datetime,
    "bsonobjectid": _matches(r"[0-9a-fA-F]{24}"),
    "hexcolor": _matches(r"#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})"),
    "ssn": _matches(r"\d{3}[- ]?\d{2}[- ]?\d{4}"),
    "password": lambda _text: True,
    "k8s-short-name": lambda text: len(text) <= 63 and re.fullmatch(_SHORT_NAME, text) is not None,
    "k8s-long-name": _long_name,
}
# the formats CRDs support that regokite does not check: a schema naming one is refused
UNCHECKED = ("email", "uri", "hostname", "mac", "isbn", "isbn10", "isbn13", "creditcard", "rgbcolor", "duration")
