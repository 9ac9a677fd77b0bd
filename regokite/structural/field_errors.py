"""Errors as Kubernetes' `field.Error` prints them, and the Go formatting they print values with.

The API server answers a CRD or an object that fails its schema with these
strings (`spec.parameters.labels: Invalid value: "string": spec.parameters.labels
in body must be of type array: "string"`); Gatekeeper's webhook and gator
print the same ones, so a user sees one wording wherever regokite refuses.
"""

from __future__ import annotations

import json
import math
import unicodedata
from dataclasses import dataclass
from typing import Any

REQUIRED = "Required value"
INVALID = "Invalid value"
UNSUPPORTED = "Unsupported value"
FORBIDDEN = "Forbidden"
TOO_LONG = "Too long"
TOO_MANY = "Too many"
DUPLICATE = "Duplicate value"
OMITTED = object()  # the bad value is not shown (field.Required, field.Forbidden, field.TooLong)


@dataclass(frozen=True)
class FieldError:
    """One `field.Error`: where, what kind, the bad value (OMITTED: none shown), and the detail."""

    path: str
    kind: str
    value: Any = OMITTED
    detail: str = ""

    def __str__(self) -> str:
        body = self.kind if self.value is OMITTED else f"{self.kind}: {go_value(self.value)}"
        return f"{self.path}: {body}: {self.detail}" if self.detail else f"{self.path}: {body}"


def aggregate(errors: list[FieldError]) -> str:
    """Several errors as `errors.NewAggregate` prints them: one alone, more in brackets."""
    texts = list(dict.fromkeys(str(e) for e in errors))
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


def go_value(value: Any) -> str:
    """A bad value as field.Error's body prints it: strings quoted, simple types with %v, the rest as JSON."""
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bool | int | float):
        return go_plain(value)
    return go_json(value)


def go_plain(value: Any) -> str:
    """Go's %v of a decoded JSON value (strings bare, numbers as Go prints float64 and int64)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if value is None:
        return "<nil>"
    if isinstance(value, list):
        return "[" + " ".join(go_plain(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_plain(value[k])}" for k in sorted(value)) + "]"
    return str(value)


def go_json(value: Any) -> str:
    """Go's json.Marshal of a decoded JSON value: compact, keys sorted, <, > and & escaped."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{go_json(str(k))}:{go_json(value[k])}" for k in sorted(value)) + "}"
    if isinstance(value, list):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    if isinstance(value, float):
        return go_float(value) if abs(value) >= 1e21 or abs(value) < 1e-6 else repr(value)
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def go_float(value: float) -> str:
    """Go's %v of a float64 (strconv 'g', shortest): the shortest digits, an exponent outside [-4, 6)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    digits, exponent = _shortest(value)
    if exponent < -4 or exponent >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        sign = "-" if value < 0 else ""
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    text = f"{abs(value):.{max(len(digits) - 1 - exponent, 0)}f}"
    return ("-" if value < 0 else "") + text


def _shortest(value: float) -> tuple[str, int]:
    """The shortest decimal digits that read back as `value`, and the exponent of the first one."""
    mantissa, _, exponent = f"{abs(value):.17e}".partition("e")
    for precision in range(1, 18):
        candidate = f"{abs(value):.{precision - 1}e}"
        if float(candidate) == abs(value):
            mantissa, _, exponent = candidate.partition("e")
            break
    return mantissa.replace(".", ""), int(exponent)


_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(text: str) -> str:
    """Go's strconv.Quote: printable runes as they are, the rest escaped as Go escapes them. Go's printable
    (unicode.IsPrint: letters, marks, numbers, punctuation, symbols, the ASCII space) is str.isprintable, judged
    by Python's Unicode database: a rune it does not assign is escaped, as Go escapes one its own tables do not
    assign either (see `unassigned_rune` for the runes Go's newer tables may print)."""
    if text.isascii() and text.isprintable():  # most strings: only `"` and `\` escaped
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    out = ['"']
    for char in text:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char.isprintable() or char == " ":
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    out.append('"')
    return "".join(out)


def unassigned_rune(text: str) -> str | None:
    """The first rune of `text` Python's Unicode database does not assign, or a lone surrogate (no Go string
    holds one). go_quote cannot judge these as Go does: Go's tables may be newer (Go 1.24's are Unicode 15.0,
    Python 3.11's 14.0, which leaves 4482 runes Go prints and go_quote escapes)."""
    if text.isascii():
        return None
    return next((char for char in text if unicodedata.category(char) in ("Cn", "Cs")), None)
