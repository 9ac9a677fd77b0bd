"""semver.is_valid and semver.compare as OPA's (internal/semver.Parse), in place of regorus's.

OPA reads a leading `v` (`v1.2.3` is valid; regorus said false), reads the
pre-release and metadata after the first `-` and `+`, and `semver.is_valid`
of a non-string is false (regorus: an error, so a call OPA answers failed,
or under OPA's default evaluation was undefined). SemVer 2.0.0's leading
zeros (`01.2.3`, `1.2.3-01`) and empty sections (`1.2.3-`, `1.2.3+`) are
invalid, as OPA's conformance suite pins them (semverisvalid-strict,
semvercompare-strict); OPA 1.20.2 itself still took them.
"""

from __future__ import annotations

import re
from typing import Any

from regokite.engine.extensions.common import BuiltinError, builtin, string_operand

_IDENTIFIERS = re.compile(r"[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*")
_INT64 = 2**63 - 1


def parse(version: str) -> tuple[int, int, int, str] | None:
    """(major, minor, patch, pre-release), or None where OPA's Parse errs."""
    version = version.removeprefix("v")
    version, plus, metadata = version.partition("+")
    if plus and not _IDENTIFIERS.fullmatch(metadata):
        return None
    version, minus, pre_release = version.partition("-")
    if minus and not _IDENTIFIERS.fullmatch(pre_release):
        return None
    if any(_leading_zero(part) for part in pre_release.split(".") if part.isascii() and part.isdigit()):
        return None
    parts = version.split(".")
    if len(parts) != 3 or not all(_go_int64(part) and not _leading_zero(part) for part in parts):
        return None
    major, minor, patch = (int(part) for part in parts)
    return major, minor, patch, pre_release


def _leading_zero(number: str) -> bool:
    return len(number) > 1 and number.startswith("0")


def _go_int64(text: str) -> bool:
    """Whether Go's strconv.ParseInt(text, 10, 64) reads it (a sign, then ASCII digits, within int64)."""
    digits = text[1:] if text[:1] in "+-" else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return False
    return -_INT64 - 1 <= int(text) <= _INT64


@builtin("semver.is_valid")
def is_valid(value: Any) -> bool:
    return isinstance(value, str) and parse(value) is not None


@builtin("semver.compare")
def compare(a: Any, b: Any) -> int:
    parsed = []
    for position, operand in ((1, a), (2, b)):
        text = string_operand("semver.compare", operand, position)
        version = parse(text)
        if version is None:
            raise BuiltinError(f"operand {position}: string {text} is not a valid SemVer")
        parsed.append(version)
    first, second = parsed
    if first[:3] != second[:3]:
        return 1 if first[:3] > second[:3] else -1
    return _pre_release_order(first[3], second[3])


def _pre_release_order(a: str, b: str) -> int:
    """SemVer's precedence of two pre-releases (none is the greatest), as OPA's Version.Compare: numeric
    identifiers below the others, compared as numbers (Go's Atoi, beyond int64 clamped)."""
    if a == b:
        return 0
    if not a or not b:
        return 1 if not a else -1
    left, right = a.split("."), b.split(".")
    for x, y in zip(left, right, strict=False):
        x_int, y_int = x.isascii() and x.isdigit(), y.isascii() and y.isdigit()
        if x_int != y_int:
            return -1 if x_int else 1
        if x_int and (x_value := min(int(x), _INT64)) != (y_value := min(int(y), _INT64)):
            return 1 if x_value > y_value else -1
        if not x_int and x != y:
            return 1 if x > y else -1
    if len(left) != len(right):
        return 1 if len(left) > len(right) else -1
    raise AssertionError(f"pre-releases {a!r} and {b!r} differ but compare equal")  # no leading zeros
