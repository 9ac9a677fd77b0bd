"""yaml.is_valid as OPA: the first document of the string decides (Go's yaml.Unmarshal reads
only that one), so a multi-document string is valid; regorus answered false for it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml


def is_valid(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        next(iter(yaml.safe_load_all(value)), None)
    except yaml.YAMLError:
        return False
    return True


BUILTINS: dict[str, tuple[int, Callable[..., object]]] = {"yaml.is_valid": (1, is_valid)}
