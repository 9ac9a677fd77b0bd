"""array.flatten (one level of nested arrays flattened) and array.slice, as OPA.

regorus's array.slice took a fractional index (`array.slice(a, 1, 1.5)`),
where OPA errs: both indexes must be integers, clamped to the array.
"""

from __future__ import annotations

from typing import Any

from regokite.engine.extensions.common import BuiltinError, builtin, int_operand, type_name


@builtin("array.flatten")
def flatten(array: Any) -> list[Any]:
    if not isinstance(array, list):
        raise BuiltinError(f"array.flatten: operand 1 must be array but got {type_name(array)}")
    return [item for element in array for item in (element if isinstance(element, list) else [element])]


@builtin("array.slice")
def array_slice(array: Any, start: Any, stop: Any) -> list[Any]:
    if not isinstance(array, list):
        raise BuiltinError(f"array.slice: operand 1 must be array but got {type_name(array)}")
    first, last = int_operand("array.slice", start, 2), int_operand("array.slice", stop, 3)
    last = min(max(last, 0), len(array))
    first = min(max(first, 0), last)
    return array[first:last]
