"""array.flatten: one level of nested arrays flattened, as OPA."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from regokite.engine.extensions.common import BuiltinError, type_name


def flatten(array: Any) -> list[Any]:
    if not isinstance(array, list):
        raise BuiltinError(f"array.flatten: operand 1 must be array but got {type_name(array)}")
    return [item for element in array for item in (element if isinstance(element, list) else [element])]


BUILTINS: dict[str, tuple[int, Callable[..., object]]] = {"array.flatten": (1, flatten)}
