"""`+`, `-`, `*` and `/` as OPA computes them, where regorus's 64-bit doubles may not.

OPA keeps a number's decimal text. Integers add, subtract and multiply
exactly; anything else (a fraction, any quotient) is computed as Go's
`big.Float` with a 64-bit significand and written back as the shortest decimal
that reads as that result. regorus computes the same in doubles (53 bits), so
`0.1 + 0.2` was 0.30000000000000004 (OPA 0.3) and `9007199254740993 / 2 + 100`
was 4503599627370596 (OPA 4503599627370596.5, which `array.slice` refuses).

`arith` answers OPA's result where a regorus number holds it exactly (an
integer of 64 bits, or a double whose shortest decimal is OPA's), and is an
evaluation error otherwise: a result with more digits than a double holds
(`1 / 3`, OPA's 0.33333333333333333334) would be answered otherwise than OPA,
and could pass as an integer where OPA sees a fraction. The rewrite in
engine.rewrite.arithmetic calls it only where integers of up to 53 bits could not
answer in place.
"""

from __future__ import annotations

import functools
import json
from fractions import Fraction

from regokite.engine.extensions.common import BuiltinError, Refusal, builtin, native, type_name
from regokite.engine.extensions.internal import ARITH

_NAMES = {"+": "plus", "-": "minus", "*": "mul", "/": "div"}
_BITS = 64  # big.Float's precision for a number read from its text
_DOUBLE = 53  # big.NewFloat's, product's accumulator


def arith(op: object, left: object, right: object) -> int | float:
    """OPA's `left op right`, or an error where a regorus number cannot hold it.

    The operands come as regorus's JSON text of them (json.marshal): regorus passes no integral
    double beyond 64-bit integers to Python (1e21, gatekeeper-library's storage multiples). The
    answers are remembered (a policy computes the same quantities request after request)."""
    if isinstance(op, str) and isinstance(left, str) and isinstance(right, str):
        return _remembered(op, left, right)
    return _arith(op, left, right)


@functools.lru_cache(maxsize=4096)
def _remembered(op: str, left: str, right: str) -> int | float:
    return _arith(op, left, right)


def _arith(op: object, left: object, right: object) -> int | float:
    name = _NAMES.get(op) if isinstance(op, str) else None
    if name is None:
        raise BuiltinError(f"{ARITH}: unknown operator {op!r}")
    a, b = _operand(name, left, 1), _operand(name, right, 2)
    if op == "/" and b == 0:
        raise BuiltinError(f"{name}: divide by zero")
    if op != "/" and a.denominator == 1 and b.denominator == 1:
        value = a + b if op == "+" else a - b if op == "-" else a * b
    else:
        x, y = _rounded(a), _rounded(b)
        exact = x + y if op == "+" else x - y if op == "-" else x * y if op == "*" else x / y
        value = _shortest(_rounded(exact))
    return _held(name, value)


def _operand(name: str, text: object, position: int) -> Fraction:
    value = json.loads(text) if isinstance(text, str) else text
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BuiltinError(f"{name}: operand {position} must be number but got {type_name(value)}")
    return exact_value(value)


def exact_value(number: int | float) -> Fraction:
    """The number OPA holds for a regorus number: an integer (an integral double exactly), or a
    fractional double's shortest decimal, which is what regorus writes and reads for it."""
    if isinstance(number, int) or number.is_integer():
        return Fraction(number)
    return Fraction(repr(number))


def _held(name: str, value: Fraction) -> int | float:
    """value as a regorus number that holds it exactly (see _operand), or a Refusal."""
    if value.denominator == 1 and -(2**63) <= value < 2**64:
        return int(value)
    try:
        double = float(value)
    except OverflowError:
        double = None
    if double is not None and exact_value(double) == value:
        return double
    raise Refusal(
        f"{name}: the result {_text(value)} holds more digits than the embedded engine's 64-bit numbers "
        "(OPA keeps them): round the operands (e.g. with round or floor), or use --engine opa"
    )


def number_text(value: object, marshalled: object) -> object:
    """regorus's to_number(value) (as its JSON text), where it is the number the string `value`
    writes: OPA keeps a string's text as the number, regorus reads it as a double
    (to_number("0.10000000000000000001") == 0.1 was true, false in OPA), so a string a double
    holds otherwise is an error."""
    number = json.loads(marshalled) if isinstance(marshalled, str) else marshalled
    if not isinstance(value, str) or isinstance(number, bool) or not isinstance(number, int | float):
        return number
    if value != value.strip():
        raise BuiltinError(f"to_number: strconv.ParseFloat: parsing {json.dumps(value)}: invalid syntax")
    try:
        written = Fraction(value)
    except (ValueError, ZeroDivisionError):
        return number  # a form Fraction does not read (hex, inf): regorus's own answer or error
    if written != exact_value(number):
        raise Refusal(
            f"to_number: {value!r} is not held exactly by the embedded engine's 64-bit numbers (OPA keeps its "
            "digits): write fewer digits, or use --engine opa"
        )
    return number


@builtin("sum")
def total(collection: object) -> int | float:
    """OPA's sum: integers added exactly, anything else in big.Float's 64 bits item by item (a set's
    numbers in their order), written back as the shortest decimal; regorus added doubles
    (`sum([0.1, 0.2])` was 0.30000000000000004, OPA's 0.3)."""
    values = _numbers("sum", collection)
    if all(value.denominator == 1 for value in values):
        return _held("sum", sum(values, Fraction(0)))
    accumulated = Fraction(0)
    for value in values:
        accumulated = _rounded(accumulated + _rounded(value))
    return _held("sum", _shortest(accumulated))


@builtin("product")
def product(collection: object) -> int | float:
    """OPA's product: integers multiplied exactly, anything else into an accumulator of 53 bits (a
    double's) whose factors are read at 64 bits; regorus multiplied doubles (`product([0.1, 0.1,
    0.1])` was 0.0010000000000000002, OPA's 0.001)."""
    values = _numbers("product", collection)
    if all(value.denominator == 1 for value in values):
        whole = Fraction(1)
        for value in values:
            whole *= value
        return _held("product", whole)
    accumulated = Fraction(1)
    for value in values:
        accumulated = _rounded(accumulated * _rounded(value), _DOUBLE)
    return _held("product", _shortest(accumulated, _DOUBLE))


def _numbers(name: str, collection: object) -> list[Fraction]:
    """The numbers of an array, or of a set in its order; OPA's errors for anything else."""
    if not isinstance(collection, list | set | frozenset):
        raise BuiltinError(f"{name}: operand 1 must be one of {{array, set}} but got {type_name(collection)}")
    items = list(collection)
    if any(isinstance(item, bool) or not isinstance(item, int | float) for item in items):
        raise BuiltinError(f"{name}: operand 1 must be array of numbers")
    return [exact_value(item) for item in (items if isinstance(collection, list) else sorted(items))]


_regorus_shift_left = native("bits.lsh")
_WIDEST_SHIFT = 1100  # beyond it no integer but 0 is held, even as a double


@builtin("bits.lsh")
def shift_left(value: object, shift: object) -> int | float:
    """OPA's bits.lsh, a big.Int shifted: regorus's value beyond 64 bits is a double, rounded
    (bits.lsh(12345678901234567, 20) was 1.2945382599540938e+22, OPA's 12945382599540937326592); here it
    is held exactly or refused. Other operands (a fraction, a negative shift) get regorus's answer or error."""
    if type(value) is int and type(shift) is int and shift >= 0:
        return _held("bits.lsh", Fraction(value << min(shift, _WIDEST_SHIFT) if value else 0))
    return _regorus_shift_left(value, shift)


def _rounded(x: Fraction, bits: int = _BITS) -> Fraction:
    """x to the nearest number with a `bits`-bit significand, ties to even (big.Float, ToNearestEven)."""
    if x == 0:
        return x
    magnitude = abs(x)
    shift = bits - (magnitude.numerator.bit_length() - magnitude.denominator.bit_length())
    scaled = magnitude * Fraction(2) ** shift
    while scaled >= 2**bits:
        shift, scaled = shift - 1, scaled / 2
    while scaled < 2 ** (bits - 1):
        shift, scaled = shift + 1, scaled * 2
    whole, rest = divmod(scaled.numerator, scaled.denominator)
    if 2 * rest > scaled.denominator or (2 * rest == scaled.denominator and whole % 2):
        whole += 1
    result = Fraction(whole) / Fraction(2) ** shift
    return result if x > 0 else -result


def _shortest(x: Fraction, bits: int = _BITS) -> Fraction:
    """x as Go's Text('g', -1) writes it at `bits` bits: the digits of x cut where x's neighbours' halfway
    points differ from them, walking the three decimals digit by digit as math/big does (which at
    times keeps a digit more than the interval needs)."""
    if x == 0:
        return x
    magnitude = abs(x)
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length() - bits - 1
    while magnitude / Fraction(2) ** exponent >= 2 ** (bits + 1):
        exponent += 1
    while magnitude / Fraction(2) ** exponent < 2**bits:
        exponent -= 1
    halves = int(magnitude / Fraction(2) ** exponent)  # x in half-ulps: bits + 1 bits
    scale = Fraction(2) ** exponent
    digits, place = _decimal(magnitude)
    lower, _ = _decimal((halves - 1) * scale)
    upper, _ = _decimal((halves + 1) * scale)
    inclusive = halves & 2 == 0
    for i, digit in enumerate(digits):
        low, high = _at(lower, i), _at(upper, i)
        ok_down = low != digit or (inclusive and i + 1 == len(lower))
        ok_up = digit != high and (inclusive or int(digit) + 1 < int(high) or i + 1 < len(upper))
        if ok_down and ok_up:
            cut = _round_half_even(digits, i + 1)
        elif ok_down:
            cut = int(digits[: i + 1])
        elif ok_up:
            cut = int(digits[: i + 1]) + 1
        else:
            continue
        value = cut * Fraction(10) ** (place + len(digits) - i - 1)
        return value if x > 0 else -value
    return x


def _decimal(value: Fraction) -> tuple[str, int]:
    """A positive binary fraction's exact decimal: its significant digits and the place of the last
    one (value = int(digits) * 10**place), trailing zeros left out."""
    zeros = 0
    while value.denominator != 1:
        value, zeros = value * 10, zeros + 1
    digits = str(value.numerator)
    stripped = digits.rstrip("0")
    return stripped, len(digits) - len(stripped) - zeros


def _at(digits: str, index: int) -> str:
    return digits[index] if index < len(digits) else "0"


def _round_half_even(digits: str, count: int) -> int:
    """The first `count` digits, rounded by the rest (an exact half to an even last digit)."""
    kept, rest = int(digits[:count]), digits[count:]
    up = rest > "5" or (rest == "5" and kept % 2 == 1)
    return kept + 1 if up else kept


def _text(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    digits = str(abs(value.numerator) * 10**40 // value.denominator).rjust(41, "0")
    text = f"{digits[:-40]}.{digits[-40:]}".rstrip("0")
    return ("-" if value < 0 else "") + text
