"""yaml.is_valid as OPA: every document of the string must parse, so a multi-document string is
valid (regorus answered false for it) and one whose later content does not parse is not (OPA
since its PR 9218, "reject documents with unreachable content"; 1.20 read the first document only).

`plain` is what engine.rewrite.routes's yaml.marshal asks before regorus writes the YAML: regorus
quotes otherwise than Go's YAML writer (`'1'` for "1", `yes` where Go writes `"yes"`, `😀` for
"\\U0001F600") and writes an exponent otherwise (`1e20`, Go `1e+20`); the layout is the same.
So a value holding only the strings and numbers both write alike is written by regorus, and
anything else is an error (fail closed) saying what to change.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import yaml

from regokite.engine.extensions.common import Refusal, builtin

# a string both write alike: an ASCII letter first, then printable characters of the Basic Multilingual
# Plane (Go writes others escaped), no ": " or " #" and no space or colon last (those both quote), and
# no YAML 1.1 word (Go quotes those, regorus does not); 8,000 random such strings beside OPA: none differ
_PLAIN = re.compile(r"[A-Za-z][\x20-\x7e\u00a0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]*")
_YAML11_WORDS = frozenset(
    w
    for word in ("y", "yes", "n", "no", "true", "false", "on", "off", "null", "nan", "inf")
    for w in (word, word.capitalize(), word.upper())
)


@builtin("yaml.is_valid")
def is_valid(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        for _ in yaml.safe_load_all(value):
            pass
    except yaml.YAMLError:
        return False
    return True


def single(value: Any) -> bool:
    """True unless `value` is YAML of several documents, where OPA's yaml.unmarshal answers the first and
    regorus errs: then a refusal, which stays an error under OPA's default evaluation (no undefined)."""
    if not isinstance(value, str) or ("---" not in value and "..." not in value):
        return True
    try:
        documents = sum(1 for _ in yaml.safe_load_all(value))
    except yaml.YAMLError:
        return True  # regorus's error is OPA's
    if documents > 1:
        raise Refusal("yaml.unmarshal: YAML of several documents (OPA answers the first): use --engine opa")
    return True


def plain(value: Any) -> bool:
    """True when regorus writes `value` as YAML as OPA does; else the error saying why not."""
    if isinstance(value, dict):
        for key, item in value.items():
            plain(key)
            plain(item)
        if sorted(value) != sorted(value, key=functools.cmp_to_key(_go_key_order)):
            raise _unlike(f"the order of the keys {sorted(value)!r}")
    elif isinstance(value, list | set | frozenset):
        for item in value:
            plain(item)
    elif isinstance(value, str):
        if not _PLAIN.fullmatch(value) or ": " in value or " #" in value or value.endswith((" ", ":")):
            raise _unlike(f"the string {value!r}")
        if value in _YAML11_WORDS:
            raise _unlike(f"the string {value!r}")
    elif isinstance(value, int | float) and not isinstance(value, bool) and value and not 1e-4 <= abs(value) < 1e6:
        raise _unlike(f"the number {value!r}")  # 1e15 reaches here as an integer: Go writes 1e+15
    return True


def _go_key_order(a: str, b: str) -> int:
    """Go's YAML writer's order of two keys (letters after other characters, runs of digits by their
    number) where it is known to be the code-point order regorus writes in; a Refusal where digits
    decide, as that order is not reproduced here."""
    for x, y in zip(a, b, strict=False):
        if x == y:
            continue
        if x.isalpha() != y.isalpha():
            return 1 if x.isalpha() else -1
        if not x.isalpha() and (x.isnumeric() or y.isnumeric()):
            raise _unlike(f"the order of the keys {a!r} and {b!r} (a run of digits decides it)")
        return -1 if x < y else 1
    return len(a) - len(b)


def _unlike(what: str) -> Refusal:
    return Refusal(
        f"yaml.marshal: {what} is written otherwise by OPA's YAML writer (quotes, YAML 1.1 words, exponents, "
        "key order) than by the embedded engine's: marshal strings that begin with a letter, keys whose "
        "order no digits decide, and plain numbers; use json.marshal, or use --engine opa"
    )
