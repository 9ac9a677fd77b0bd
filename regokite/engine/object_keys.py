"""Object keys that are arrays, objects or sets, which regorus writes otherwise than OPA.

A result's object key that is not a string leaves the engine as text. OPA
writes a composite key (`{[1, "<"]: true}`) as Go's encoding/json writes its
value: `<`, `>`, `&`, U+2028 and U+2029 escaped (`\\u003c`), an inner
object's keys sorted as strings, a set's items in OPA's order (an object
before a set). regorus writes it as serde_json does, and its text no longer
says whether the key was a string.
So a result holding a key that reads as an array or object and that OPA
could write otherwise is an evaluation error, never a silently different
answer; one that both write alike (`{[1, "a"]: true}`) passes unchanged. (A
string key written like such a value, `{"[\\"<\\"]": 1}`, fails too: rare,
and failing closed.)

Only results whose raw JSON holds `"[` or `"{` are looked at (a substring
search, which costs next to nothing on the others).
"""

from __future__ import annotations

import json
from typing import Any

_GO_ESCAPED = frozenset("<>&\u2028\u2029")


def differing_key(raw: str, value: Any) -> str | None:
    """The first object key in `value` (parsed from `raw`) that OPA may write otherwise, else None."""
    if '"[' not in raw and '"{' not in raw:
        return None
    return _search(value)


def _search(value: Any) -> str | None:
    if isinstance(value, list):
        for item in value:
            found = _search(item)
            if found is not None:
                return found
    elif isinstance(value, dict):
        for key, item in value.items():
            if _composite_differs(key):
                return key
            found = _search(item)
            if found is not None:
                return found
    return None


def _composite_differs(key: str) -> bool:
    """Whether `key`, if it is a composite value as regorus writes it, may read otherwise in OPA."""
    if key[:1] not in ("[", "{"):
        return False
    try:
        parsed = json.loads(key, object_pairs_hook=_Pairs)
    except ValueError:
        return False  # not JSON: a string key
    return _differs(parsed)


class _Pairs(list):
    """An object's members in the order regorus wrote them."""


def _differs(value: Any) -> bool:
    if isinstance(value, str):
        return any(c in _GO_ESCAPED for c in value)
    if isinstance(value, _Pairs):
        keys = [k for k, _ in value]
        if keys != sorted(set(keys)):  # a number or other non-string key among them, or a duplicate
            return True
        return any(_differs(k) or _composite_differs(k) or _differs(v) for k, v in value)
    if isinstance(value, list):
        kinds = {type(item) for item in value}
        if list in kinds and _Pairs in kinds:
            return True  # maybe a set holding a set and an object, which OPA orders otherwise
        return any(_differs(item) for item in value)
    return False


def message(key: str) -> str:
    return (
        f"the result holds an object key that is an array, object or set ({key}), which the embedded engine "
        "writes otherwise than OPA (Go's JSON escapes, the order of keys and of a set's items): make the key a "
        "string (json.marshal, concat), or use --engine opa"
    )
