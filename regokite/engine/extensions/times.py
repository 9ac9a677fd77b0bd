"""time.add_date as OPA's: Go's `time.AddDate` on the instant read as OPA's tzTime reads it.

Go adds the years, months and days to the date's fields and normalises the
result (`time.Date`): month 0 is December of the year before, day 31 of a
30-day month the 1st of the next, so a negative month or a day past the end
of a month moves the date as Go does, where regorus clamped, answered a day
apart or nothing (`time.add_date(-1, 2, -1, 3)`, January 31 + 1 month). The
instant is OPA's: nanoseconds since the epoch, or `[ns, zone, layout]` with
an IANA zone ("" and "UTC" are UTC, "Local" the machine's) whose wall clock
the fields are; the result outside int64 nanoseconds is OPA's error.
"""

from __future__ import annotations

import os
import zoneinfo
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from regokite.engine.extensions.common import BuiltinError, Refusal, builtin, int_operand, string_operand, type_name

NAME = "time.add_date"
_NS_PER_DAY = 86_400 * 10**9
_INT64 = (-(2**63), 2**63 - 1)
# Go's time.Date computes days in 64-bit integers: operands this large could wrap there, where Python does not
_LARGEST = 10**9


@builtin(NAME)
def add_date(instant: Any, years: Any, months: Any, days: Any) -> int:
    ns, zone = _tz_time(instant)
    added = [int_operand(NAME, value, i) for value, i in ((years, 2), (months, 3), (days, 4))]
    if any(abs(value) > _LARGEST for value in added):
        raise Refusal(f"{NAME}: an operand beyond {_LARGEST} (Go's date arithmetic would overflow): use --engine opa")
    wall = ns + _offset(zone, ns)
    day, time_of_day = divmod(wall, _NS_PER_DAY)
    year, month, mday = _civil(day)
    month_index = month - 1 + added[1]
    year += added[0] + month_index // 12
    local = (_days(year, month_index % 12 + 1, 1) + mday - 1 + added[2]) * _NS_PER_DAY + time_of_day
    result = local - _offset(zone, local - _offset(zone, local))  # time.Date's choice of offset, as Go's
    if not _INT64[0] <= result <= _INT64[1]:
        raise BuiltinError("time outside of valid range")
    return result


def _tz_time(value: Any) -> tuple[int, tzinfo]:
    """OPA's tzTime: the nanoseconds and the zone of a number or `[ns, zone, layout]`."""
    zone: tzinfo = UTC
    if isinstance(value, list):
        if not value:
            raise BuiltinError(f"{NAME}: operand 1 must be one of {{number, array}} but got array")
        if len(value) > 1:
            zone = _zone(value[1])
        if len(value) > 2 and not isinstance(value[2], str):
            raise BuiltinError(f"{NAME}: operand 1 must be string but got {type_name(value[2])}")
        value = value[0]
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise BuiltinError(f"{NAME}: operand 1 must be one of {{number, array}} but got {type_name(value)}")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BuiltinError(f"{NAME}: operand 1 must be number but got {type_name(value)}")
    if value != int(value) or not _INT64[0] <= int(value) <= _INT64[1]:
        raise BuiltinError("timestamp too big")
    return int(value), zone


def _zone(name: Any) -> tzinfo:
    if not isinstance(name, str):
        raise BuiltinError(f"{NAME}: operand 1 must be string but got {type_name(name)}")
    if name in ("", "UTC"):
        return UTC
    if name == "Local":
        local = os.environ.get("TZ", "").removeprefix(":")
        if local:
            return _load(local)
        try:
            with open("/etc/localtime", "rb") as data:
                return zoneinfo.ZoneInfo.from_file(data, key="Local")
        except OSError:
            return UTC  # Go's time.Local without /etc/localtime
    return _load(name)


def _load(name: str) -> tzinfo:
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise BuiltinError(f"unknown time zone {name}") from None


def _offset(zone: tzinfo, ns: int) -> int:
    """The zone's offset from UTC, in nanoseconds, at the instant `ns`."""
    if zone is UTC:
        return 0
    seconds = max(min(ns // 10**9, 253402300799), -62135596800)  # datetime's years 1..9999
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)
    offset = moment.astimezone(zone).utcoffset()
    return 0 if offset is None else int(offset.total_seconds()) * 10**9


def _days(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to the proleptic Gregorian date (any year)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def _civil(days: int) -> tuple[int, int, int]:
    """The proleptic Gregorian (year, month, day) `days` after 1970-01-01."""
    days += 719468
    era = days // 146097
    day_of_era = days - era * 146097
    year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36524 - day_of_era // 146096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * shifted + 2) // 5 + 1
    month = shifted + (3 if shifted < 10 else -9)
    return year_of_era + era * 400 + (month <= 2), month, day


_GO_UNITS = {"ns": 1, "us": 10**3, "\u00b5s": 10**3, "\u03bcs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9}
_GO_UNITS["h"] = 3600 * 10**9
# OPA's second reading, where Go's fails: days, weeks, 365-day years, and no Greek mu
_OPA_UNITS = {k: v for k, v in _GO_UNITS.items() if k != "\u03bcs"} | {"d": 86400 * 10**9, "w": 7 * 86400 * 10**9}
_OPA_UNITS["y"] = 365 * 86400 * 10**9
_DIGITS = frozenset("0123456789")


@builtin("time.parse_duration_ns")
def parse_duration_ns(value: Any) -> int:
    """Go's time.ParseDuration, and where it fails OPA 1.20's reading with days, weeks and 365-day years
    (`1d`, `1.5w`, `1y`; regorus knew no `d`) but without `\u03bcs`: each `[digits][.digits]unit`, a
    fraction scaled as Go's float64, within int64."""
    text = string_operand("time.parse_duration_ns", value, 1)
    try:
        return _duration(text, _GO_UNITS)
    except BuiltinError:
        return _duration(text, _OPA_UNITS)


def _duration(text: str, units: dict[str, int]) -> int:
    invalid = BuiltinError(f'time: invalid duration "{text}"')
    rest, negative = text, text[:1] == "-"
    if rest[:1] in ("-", "+"):
        rest = rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise invalid
    total = 0
    while rest:
        if not (rest[0] == "." or rest[0] in _DIGITS):
            raise invalid
        whole, after = _leading_int(rest, invalid)
        fraction, scale, digits = 0, 1.0, len(after) != len(rest)
        if after[:1] == ".":
            fraction, scale, tail = _leading_fraction(after[1:])
            digits, after = digits or len(tail) != len(after) - 1, tail
        if not digits:
            raise invalid
        end = next((i for i, c in enumerate(after) if c == "." or c in _DIGITS), len(after))
        unit = units.get(after[:end])
        if unit is None:
            raise BuiltinError(f'time: {"missing" if end == 0 else "unknown"} unit in duration "{text}"')
        rest = after[end:]
        if whole > 2**63 // unit:
            raise invalid
        amount = whole * unit
        if fraction:
            amount += int(float(fraction) * (float(unit) / scale))
        total += amount
        if amount > 2**63 or total > 2**63:
            raise invalid
    if not negative and total > 2**63 - 1:
        raise invalid
    return -total if negative else total


def _leading_int(text: str, overflow: BuiltinError) -> tuple[int, str]:
    """Go's leadingInt: the leading digits' value (0 for none) and the rest; past 2^63 an error."""
    i, number = 0, 0
    while i < len(text) and text[i] in _DIGITS:
        if number > 2**63 // 10:
            raise overflow
        number = number * 10 + ord(text[i]) - 48
        if number > 2**63:
            raise overflow
        i += 1
    return number, text[i:]


def _leading_fraction(text: str) -> tuple[int, float, str]:
    """Go's leadingFraction: the leading digits' value and scale (digits past 63 bits dropped), the rest."""
    i, number, scale, overflow = 0, 0, 1.0, False
    while i < len(text) and text[i] in _DIGITS:
        digit, i = ord(text[i]) - 48, i + 1
        if overflow or number > (2**63 - 1) // 10 or number * 10 + digit > 2**63:
            overflow = True
            continue
        number, scale = number * 10 + digit, scale * 10
    return number, scale, text[i:]
