"""regokite.jsoncodec gives what the json module gives: the same values decoded, the same document encoded,
where orjson alone would not (integers beyond 64 bits, NaN and Infinity, lone surrogates, subclasses)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import random
from collections import OrderedDict
from typing import Any

import pytest

from regokite.jsoncodec import dumps, loads

TRICKY_TEXTS = [
    "18446744073709551616",  # 2**64: orjson alone reads a float
    "-9223372036854775809",
    "[123456789012345678901234567890, 1.5]",
    '{"n": 1e400, "m": -1e400}',  # inf: orjson refuses
    "NaN",
    '["\\ud800", "caf\u00e9 \\ud83d\\ude00"]',  # a lone surrogate escape: orjson refuses
    '{"a": 1, "a": 2}',
    "1.7976931348623157e308",
    "5e-324",
    "-0.0",
    '"\\u0000\\u2028"',
]


@pytest.mark.parametrize("text", TRICKY_TEXTS)
def test_decodes_as_json_loads(text: str) -> None:
    for data in (text, text.encode("utf-8", "surrogatepass")):
        assert repr(loads(data)) == repr(json.loads(data))  # repr: inf, nan, -0.0 and ints compare as written


def test_bad_utf8_is_json_loads_error() -> None:
    with pytest.raises(UnicodeDecodeError):
        json.loads(b'"\xff"')
    with pytest.raises(UnicodeDecodeError):
        loads(b'"\xff"')


@dataclasses.dataclass
class Point:
    x: int


class Text(str):
    pass


TRICKY_VALUES: list[Any] = [
    float("nan"),
    {"x": [float("inf"), float("-inf")]},
    2**64,
    -(2**63) - 1,
    {1: "a", None: "b", False: "c", 1.5: "d"},
    "\ud800",
    {"s": "caf\u00e9 \U0001f600 \u2028"},
    OrderedDict(b=1, a=2),
    {"k": Text("v")},
    [1.0, 0.1, 1e16, 1e-7, -0.0, 5e-324],
    {"null": None},
    (1, 2),
]


@pytest.mark.parametrize("value", TRICKY_VALUES, ids=repr)
def test_encodes_the_document_json_dumps_encodes(value: Any) -> None:
    assert repr(json.loads(dumps(value))) == repr(json.loads(json.dumps(value)))


@pytest.mark.parametrize(
    "value", [Point(1), dt.datetime(2026, 1, 1), object()], ids=["dataclass", "datetime", "object"]
)
def test_what_json_cannot_encode_is_refused_as_json_refuses(value: Any) -> None:
    """orjson encodes dataclasses and datetimes its own way; the codec refuses them as json does."""
    with pytest.raises(TypeError):
        json.dumps(value)
    with pytest.raises(TypeError):
        dumps(value)


def _document(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(8 if depth < 4 else 5)
    if kind == 0:
        return rng.randint(-(2**70), 2**70) if rng.random() < 0.2 else rng.randint(-1000, 10**12)
    if kind == 1:
        return rng.choice([rng.uniform(-1e6, 1e6), rng.random() * 10 ** rng.randint(-320, 308), 0.1, -0.0])
    if kind == 2:
        points = [rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0x2FFF), 0x1F600]) for _ in range(5)]
        return "".join(map(chr, points))
    if kind == 3:
        return rng.choice([None, True, False])
    if kind == 4:
        return "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 24)))
    if kind == 5:
        return [_document(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {f"k{rng.randrange(100)}": _document(rng, depth + 1) for _ in range(rng.randrange(4))}


def test_random_documents_round_trip_as_json() -> None:
    rng = random.Random(44)
    for _ in range(3000):
        value = _document(rng)
        text = json.dumps(value)
        assert repr(loads(text.encode())) == repr(json.loads(text))
        assert repr(loads(dumps(value))) == repr(json.loads(text))
