"""yaml.is_valid as OPA: the first document of the string decides (Go's yaml.Unmarshal reads
only that one), so a multi-document string is valid; regorus answered false for it.

`plain` is what engine.opa_syntax's yaml.marshal asks before regorus writes the YAML: regorus
quotes otherwise than Go's YAML writer (`'1'` for "1", `yes` where Go writes `"yes"`, `😀` for
"\\U0001F600") and writes an exponent otherwise (`1e20`, Go `1e+20`); the layout is the same.
So a value holding only the strings and numbers both write alike is written by regorus, and
anything else is an error (fail closed) saying what to change.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import yaml

from regokite.engine.extensions.common import Refusal

# a string both write bare: a letter, then letters, digits, `_ . / -`; none YAML 1.1 reads as a bool,
# null, a number or infinity
_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9_./-]*")
_YAML11_WORDS = frozenset(
    w
    for word in ("y", "yes", "n", "no", "true", "false", "on", "off", "null", "nan", "inf")
    for w in (word, word.capitalize(), word.upper())
)


def is_valid(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        next(iter(yaml.safe_load_all(value)), None)
    except yaml.YAMLError:
        return False
    return True


def plain(value: Any) -> bool:
    """True when regorus writes `value` as YAML as OPA does; else the error saying why not."""
    if isinstance(value, dict):
        for key, item in value.items():
            plain(key)
            plain(item)
    elif isinstance(value, list | set | frozenset):
        for item in value:
            plain(item)
    elif isinstance(value, str):
        if not _PLAIN.fullmatch(value) or value in _YAML11_WORDS:
            raise _unlike(f"the string {value!r}")
    elif isinstance(value, int | float) and not isinstance(value, bool) and value and not 1e-4 <= abs(value) < 1e6:
        raise _unlike(f"the number {value!r}")  # 1e15 reaches here as an integer: Go writes 1e+15
    return True


def _unlike(what: str) -> Refusal:
    return Refusal(
        f"yaml.marshal: {what} is written otherwise by OPA's YAML writer (quotes, YAML 1.1 words, exponents) "
        "than by the embedded engine's: marshal only letters, digits, `_ . / -` and plain numbers, use "
        "json.marshal, or use --engine opa"
    )


BUILTINS: dict[str, tuple[int, Callable[..., object]]] = {"yaml.is_valid": (1, is_valid)}
