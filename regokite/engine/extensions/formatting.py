"""sprintf as OPA: Go's fmt.Sprintf over OPA's conversion of the arguments.

regorus's own sprintf errors where Go prints a marker (`%!v(MISSING)` for a
verb without an argument, `%!(EXTRA ...)` for an argument without a verb,
`%!d(string=x)` for a verb of the wrong type: gatekeeper-library's
horizontalpodautoscaler message has six verbs for five arguments) and
formats some verbs otherwise (`%-3s`, `%s` of a number). OPA hands Go an
integer as int64 (a larger one as *big.Int), another number as float64, a
string as itself and anything else as its Rego text. What this module does
not format exactly as Go (`%c`, `%U`, `%x` of a number with a fraction,
argument indexes, `*` widths, `%q` of unprintable runes outside ASCII) is an
error, never a guess.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from regokite.engine.extensions.common import BuiltinError, Refusal, type_name
from regokite.structural import field_errors
from regokite.structural.field_errors import unassigned_rune

_NAME = "sprintf"
_VERB = re.compile(r"%(?P<flags>[-+# 0]*)(?P<width>\d+|\*)?(?:\.(?P<precision>\d*|\*))?(?P<verb>.?)", re.DOTALL)
_INT_VERBS = frozenset("bcdoOqxXUv")
_FLOAT_VERBS = frozenset("beEfFgGxXv")
_STRING_VERBS = frozenset("sqvxX")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1  # OPA hands Go a larger integer as a *big.Int


def sprintf(template: Any, arguments: Any) -> str:
    if not isinstance(template, str):
        raise BuiltinError(f"{_NAME}: operand 1 must be string but got {type_name(template)}")
    if not isinstance(arguments, list):
        raise BuiltinError(f"{_NAME}: operand 2 must be array but got {type_name(arguments)}")
    values = [_go_value(a) for a in arguments]
    out, used = [], 0
    for piece in _pieces(template):
        if isinstance(piece, str):
            out.append(piece)
            continue
        flags, width, precision, verb = piece
        if verb == "*":
            raise Refusal(f"{_NAME}: regokite does not format `*` widths or argument indexes")
        if used >= len(values):
            out.append(f"%!{verb}(MISSING)")
            continue
        value = values[used]
        used += 1
        if not flags and width is None and precision is None:  # the usual %s, %d, %v: no padding to do
            kind = type(value)
            if kind is str and verb in "sv":
                out.append(value)
                continue
            if kind is int and verb in "dv" and _INT64_MIN <= value <= _INT64_MAX:
                out.append(str(value))
                continue
        if verb == "v":  # Go's %+v and %#v are plusV and sharpV: no sign; Go syntax (a string quoted)
            flags = flags.replace("+", "")
            if "#" in flags and isinstance(value, str | tuple):
                flags = flags.replace("#", "")
                value = go_quote(value if isinstance(value, str) else value[0])
        out.append(_one(value, verb, flags, width, precision))
    if used < len(values):
        extra = ", ".join(f"{_go_type(v)}={_one(v, 'v', '', None, None)}" for v in values[used:])
        out.append(f"%!(EXTRA {extra})")
    return "".join(out)


@functools.lru_cache(maxsize=1024)
def _pieces(template: str) -> tuple[str | tuple[str, str | None, str | None, str], ...]:
    """`template` read once: its text between directives, and each directive as (flags, width, precision,
    verb), verb "*" for one regokite refuses (a `*` width or precision, an argument index). Templates are
    few and evaluated many times (a controller's child names)."""
    pieces: list[str | tuple[str, str | None, str | None, str]] = []
    at = 0
    for found in _VERB.finditer(template):
        pieces.append(template[at : found.start()])
        at = found.end()
        verb = found["verb"]
        if verb == "%" and not (found["flags"] or found["width"] or found["precision"] is not None):
            pieces.append("%")
        elif not verb:
            pieces.append("%!(NOVERB)")
        elif found["width"] == "*" or found["precision"] == "*" or verb == "[":
            pieces.append(("", None, None, "*"))
        else:
            pieces.append((found["flags"], found["width"], found["precision"], verb))
    pieces.append(template[at:])
    return tuple(p for p in pieces if p != "")


def _go_value(value: Any) -> int | float | str | tuple[str]:
    """What OPA hands Go: int (int64 or *big.Int), float, str; other values as their Rego text (a 1-tuple)."""
    if isinstance(value, bool) or value is None or isinstance(value, list | dict | set | frozenset):
        return (rego_text(value),)
    if isinstance(value, int | float | str):
        return value
    raise BuiltinError(f"{_NAME}: cannot format {type_name(value)}")


def _go_type(value: Any) -> str:
    if isinstance(value, int):
        return "int64" if -(2**63) <= value < 2**63 else "*big.Int"
    return "float64" if isinstance(value, float) else "string"


def _one(value: Any, verb: str, flags: str, width: str | None, precision: str | None) -> str:
    if isinstance(value, tuple):
        value = value[0]
    prec = None if precision is None else int(precision or 0)
    if isinstance(value, int) and not -(2**63) <= value < 2**63:  # OPA hands Go a big.Int: its own Format
        if verb not in "dsvbxXoO":
            return f"%!{verb}(big.Int={value})"
        text = _integer(value, "d" if verb in "sv" else verb, flags, prec)
    elif isinstance(value, int):
        if verb not in _INT_VERBS:
            return _bad(value, verb, flags, width, precision)
        text = _integer(value, verb, flags, prec)
    elif isinstance(value, float):
        if verb not in _FLOAT_VERBS:
            return _bad(value, verb, flags, width, precision)
        text = _float(value, verb, flags, prec)
    else:
        if verb not in _STRING_VERBS:
            return _bad(value, verb, flags, width, precision)
        text = _string(value, verb, flags, prec)
    numeric = isinstance(value, float) or (isinstance(value, int) and prec is None and verb != "c")
    if isinstance(value, int) and prec is not None:
        flags = flags.replace("0", "")  # Go pads an integer with a precision with spaces
    return _pad(text, flags, width, numeric=numeric)


def _bad(value: Any, verb: str, flags: str, width: str | None, precision: str | None) -> str:
    """Go's badVerb: the operand printed with %v, under the directive's flags, width and precision
    (`%.2f` of a string prints its first two characters)."""
    return f"%!{verb}({_go_type(value)}={_one(value, 'v', flags, width, precision)})"


def _pad(text: str, flags: str, width: str | None, *, numeric: bool) -> str:
    if width is None or len(text) >= int(width):
        return text
    fill = int(width) - len(text)
    if "-" in flags:
        return text + " " * fill
    if "0" in flags:
        if numeric and text[:1] in "+- ":
            return text[0] + "0" * fill + text[1:]
        return "0" * fill + text
    return " " * fill + text


def _sign(negative: bool, flags: str) -> str:
    return "-" if negative else "+" if "+" in flags else " " if " " in flags else ""


def _integer(value: int, verb: str, flags: str, precision: int | None) -> str:
    bases: dict[str, tuple[Callable[[int], str], str]] = {
        "d": (str, ""),
        "v": (str, ""),
        "b": (lambda n: format(n, "b"), "0b"),
        "o": (lambda n: format(n, "o"), "0"),
        "O": (lambda n: format(n, "o"), "0o"),
        "x": (lambda n: format(n, "x"), "0x"),
        "X": (lambda n: format(n, "X"), "0X"),
    }
    if verb == "c" and 0 <= value <= 0x10FFFF:
        return "\ufffd" if 0xD800 <= value <= 0xDFFF else chr(value)  # Go writes a surrogate as U+FFFD
    if verb not in bases:
        raise Refusal(f"{_NAME}: regokite does not format %{verb} of {value}")
    digits, prefix = bases[verb]
    text = digits(abs(value))
    if precision is not None:
        text = "" if precision == 0 and value == 0 else text.rjust(precision, "0")
    if verb == "O" or ("#" in flags and verb in "boxX"):
        text = prefix + text
    return _sign(value < 0, flags) + text


def _float(value: float, verb: str, flags: str, precision: int | None) -> str:
    if not math.isfinite(value) or "#" in flags or verb in "bxX":
        raise Refusal(f"{_NAME}: regokite does not format %{verb} of {value!r} with these flags")
    negative = math.copysign(1.0, value) < 0
    magnitude = abs(value)
    if verb in "vgG" and precision is not None:
        text = _general(magnitude, precision, upper=verb == "G")
    elif verb in "vgG":
        text = _shortest(magnitude, upper=verb == "G")
    elif verb in "fF":
        text = f"{magnitude:.{6 if precision is None else precision}f}"
    else:
        text = f"{magnitude:.{6 if precision is None else precision}{verb}}"
    return _sign(negative, flags) + text


def _general(value: float, precision: int, *, upper: bool) -> str:
    """strconv.FormatFloat(value, 'g', precision, 64): `precision` significant digits (at least one), rounded
    from the double's exact value, trailing zeros dropped; %e from exponent < -4 or >= the precision."""
    prec = max(precision, 1)
    exact = Decimal(value)
    digits, point = "", 0
    if exact:
        exponent = exact.adjusted()
        rounded = exact.scaleb(-exponent).quantize(Decimal(1).scaleb(1 - prec), rounding=ROUND_HALF_EVEN)
        if rounded >= 10:
            rounded, exponent = rounded.scaleb(-1), exponent + 1
        digits = "".join(map(str, rounded.as_tuple().digits)).rstrip("0")[:prec]
        point = exponent + 1
    shown = prec
    if shown > len(digits) and len(digits) >= point:
        shown = len(digits)
    if point - 1 < -4 or point - 1 >= shown:
        kept = min(prec, len(digits))
        mantissa = digits[0] + ("." + digits[1:kept].ljust(kept - 1, "0") if kept > 1 else "")
        power = point - 1
        return f"{mantissa}{'E' if upper else 'e'}{'-' if power < 0 else '+'}{abs(power):02d}"
    decimals = max((len(digits) if prec > point else prec) - point, 0)
    whole = digits[:point].ljust(point, "0") if point > 0 else "0"
    fraction = (("0" * -point + digits) if point < 0 else digits[point:]).ljust(decimals, "0")[:decimals]
    return whole + ("." + fraction if decimals else "")


def _shortest(value: float, *, upper: bool, limit: int = 6) -> str:
    """strconv.FormatFloat(value, 'g', -1, 64): shortest digits, %e from exponent < -4 or >= `limit`."""
    if value == 0:
        return "0"
    _, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits))
    point = len(text) + int(exponent)  # digits before the decimal point
    power = point - 1
    if power < -4 or power >= limit:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{mantissa}{'E' if upper else 'e'}{'-' if power < 0 else '+'}{abs(power):02d}"
    if point <= 0:
        return "0." + "0" * -point + text
    if point >= len(text):
        return text + "0" * (point - len(text))
    return text[:point] + "." + text[point:]


def _string(value: str, verb: str, flags: str, precision: int | None) -> str:
    data = value.encode()[:precision]  # %x: Go's precision counts the bytes encoded
    if precision is not None:
        value = value[:precision]
    if verb in "sv":
        return value
    if verb == "q":
        if "#" in flags or "+" in flags:
            raise Refusal(f"{_NAME}: regokite does not format %q with flags {flags!r}")
        return go_quote(value)
    if " " in flags or "#" in flags:
        raise Refusal(f"{_NAME}: regokite does not format %{verb} with flags {flags!r}")
    text = data.hex()
    return text.upper() if verb == "X" else text


def go_quote(text: str) -> str:
    """Go's strconv.Quote (structural.field_errors.go_quote), refused when `text` holds a rune whose printing
    regokite cannot judge as Go does."""
    char = unassigned_rune(text)
    if char is not None:
        raise Refusal(f"{_NAME}: regokite does not quote {char!r} as Go would")
    return field_errors.go_quote(text)


def rego_text(value: Any) -> str:
    """A value as OPA writes it (`ast.Value.String()`): strings quoted, sets `{...}` or `set()`, keys sorted."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = _shortest(abs(value), upper=False, limit=21)  # as JSON writes it: OPA keeps a number's text
        return "-" + text if value < 0 else text
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, list):
        return "[" + ", ".join(rego_text(v) for v in value) + "]"
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: _order(kv[0]))
        return "{" + ", ".join(f"{rego_text(k)}: {rego_text(v)}" for k, v in items) + "}"
    if isinstance(value, set | frozenset):
        return "{" + ", ".join(rego_text(v) for v in sorted(value, key=_order)) + "}" if value else "set()"
    raise BuiltinError(f"{_NAME}: cannot format {type_name(value)}")


def _order(value: Any) -> tuple[int, Any]:
    """OPA's order of values: null < booleans < numbers < strings < arrays < objects < sets."""
    if value is None:
        return (0, 0)
    if isinstance(value, bool):
        return (1, value)
    if isinstance(value, int | float):
        return (2, value)
    if isinstance(value, str):
        return (3, value)
    raise Refusal(f"{_NAME}: regokite does not order composite keys as OPA")


def converted_sprintf(template: Any, arguments: Any, is_array: Any) -> str:
    """sprintf as the load-time rewrite calls it (engine.rewrite.sprintf): `arguments` numbers, strings and
    other values already written as text; `is_array` whether the original operand was an array."""
    if is_array is not True:
        raise BuiltinError(f"{_NAME}: operand 2 must be array")
    return sprintf(template, arguments)
