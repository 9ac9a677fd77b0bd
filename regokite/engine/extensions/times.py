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
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from regokite.engine.extensions.common import BuiltinError, Refusal, int_operand, type_name

NAME = "time.add_date"
_NS_PER_DAY = 86_400 * 10**9
_INT64 = (-(2**63), 2**63 - 1)
# Go's time.Date computes days in 64-bit integers: operands this large could wrap there, where Python does not
_LARGEST = 10**9


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


BUILTINS: dict[str, tuple[int, Callable[..., object]]] = {NAME: (4, add_date)}
