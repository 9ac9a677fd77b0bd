"""floor and ceil as OPA's, in place of regorus's.

OPA rounds toward zero first and then steps away from it by the truncated
value's sign, so a number between -1 and 0 floors to 0 and ceils to 1
(`floor(-0.5)` is 0, `ceil(-0.5)` is 1 in OPA 1.20); regorus answered -1 and
0 (the fuzzer's `floor(-1 / 123456789)`). Elsewhere both are the usual floor
and ceil.
"""

from __future__ import annotations

import math
from typing import Any

from regokite.engine.extensions.common import BuiltinError, big_number, builtin, type_name


def _number(name: str, value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BuiltinError(f"{name}: operand 1 must be number but got {type_name(value)}")
    return value


@builtin("floor")
def floor(value: Any) -> int | float | str:
    number = _number("floor", value)
    whole = math.trunc(number)
    return big_number(whole - 1 if number != whole and whole < 0 else whole)


@builtin("ceil")
def ceil(value: Any) -> int | float | str:
    number = _number("ceil", value)
    whole = math.trunc(number)
    return big_number(whole + 1 if number != whole and whole >= 0 else whole)
