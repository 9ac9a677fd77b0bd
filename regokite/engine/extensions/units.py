"""units.parse and units.parse_bytes as OPA (regorus answered nothing or a non-finite number
where OPA errs: "exponent too large", an unknown unit, a malformed amount; and rounded
`units.parse_bytes("-2.5")` to -3 where OPA truncates to -2)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from regokite.engine.extensions.common import BuiltinError, builtin, string_operand

_BINARY = {"": 1, "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40, "pi": 2**50, "ei": 2**60}
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "p": 10**15, "e": 10**18}
_MAX_EXPONENT_DIGITS = 6


def _split(name: str, text: str) -> tuple[str, str]:
    """OPA's extractNumAndUnit: the amount (digits, `.`, an exponent) and the rest."""
    i = 0
    while i < len(text):
        char = text[i]
        if not (char.isdigit() or char in ".eE+-"):
            return text[:i], text[i:]
        if char in "eE":
            after = text[i + 1 : i + 2]
            if not after or not (after.isdigit() or after in "+-"):
                return text[:i], text[i:]
            if after in "+-":
                i += 1
            digits = len(text[i + 1 :]) - len(text[i + 1 :].lstrip("0123456789"))
            if digits > _MAX_EXPONENT_DIGITS:
                raise BuiltinError(f"{name}: exponent too large")
        i += 1
    return text, ""


def _amount(text: str) -> Fraction | None:
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


def _float64(value: Fraction, bits: int = 64) -> Fraction:
    """`value` rounded to a `bits`-bit mantissa, as a new big.Float does (nearest, ties to even)."""
    if value == 0:
        return value
    sign = -1 if value < 0 else 1
    value = abs(value)
    exponent = value.numerator.bit_length() - value.denominator.bit_length()
    scale = Fraction(2) ** (bits - 1 - exponent)
    scaled = value * scale
    while scaled >= 2**bits:
        scale /= 2
        scaled = value * scale
    while scaled < 2 ** (bits - 1):
        scale *= 2
        scaled = value * scale
    return sign * Fraction(round(scaled)) / scale


@builtin("units.parse_bytes")
def parse_bytes(value: Any) -> int:
    name = "units.parse_bytes"
    text = string_operand(name, value, 1).lower().replace('"', "")
    if " " in text:
        raise BuiltinError(f"{name}: spaces not allowed in resource strings")
    number, unit = _split(name, text)
    if not number:
        raise BuiltinError(f"{name}: no byte amount provided")
    multiplier = _BINARY.get(unit.removesuffix("b") if unit.endswith("ib") else unit)
    if multiplier is None:
        multiplier = _DECIMAL.get(unit.removesuffix("b")) if unit not in ("b",) else None
    if multiplier is None:
        raise BuiltinError(f"{name}: byte unit {unit} not recognized")
    amount = _amount(number)
    if amount is None:
        raise BuiltinError(f"{name}: could not parse byte amount to a number")
    return int(_float64(_float64(amount) * multiplier))  # big.Float: 64-bit mantissa, truncated


@builtin("units.parse")
def parse(value: Any) -> int | float:
    name = "units.parse"
    text = string_operand(name, value, 1).replace('"', "")
    if " " in text:
        raise BuiltinError(f"{name}: spaces not allowed in resource strings")
    number, unit = _split(name, text)
    if not number:
        raise BuiltinError(f"{name}: no amount provided")
    if len(unit) > 1:
        unit = unit[0] + unit[1:].lower()
    if unit == "m":
        multiplier: Fraction | int | None = Fraction(0.001)  # big.Rat.SetFloat64(0.001): the double's exact value
    elif unit == "M":
        multiplier = 10**6
    else:
        multiplier = (
            _BINARY.get(unit.lower()) if unit.lower().endswith("i") or unit == "" else _DECIMAL.get(unit.lower())
        )
    if multiplier is None:
        raise BuiltinError(f"{name}: unit {unit} not recognized")
    amount = _amount(number)
    if amount is None:
        raise BuiltinError(f"{name}: could not parse amount to a number")
    result = amount * multiplier
    if result.denominator == 1:
        return int(result)
    return float(_ten_places(result))


def _ten_places(value: Fraction) -> str:
    """big.Rat.FloatString(10): ten decimals, the last rounded half away from zero."""
    scaled = abs(value) * 10**10
    whole = int(scaled) + (1 if scaled - int(scaled) >= Fraction(1, 2) else 0)
    sign = "-" if value < 0 else ""
    return f"{sign}{whole // 10**10}.{whole % 10**10:010d}"
