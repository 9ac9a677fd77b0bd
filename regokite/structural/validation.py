"""A value checked against a structural schema as the API server checks a custom resource.

The order and wording are those of the API server's OpenAPI validator
(kube-openapi's `validate` package, its errors made `field.Error`s): per node
the type, then allOf/anyOf/oneOf/not, string length and pattern, format,
number bounds, array items and sizes, enum, and object fields and sizes;
and `x-kubernetes-list-type` set/map uniqueness. Where the API server visits
map keys in Go's random order, this visits them sorted: the same errors,
in one order. Messages of a failed anyOf/oneOf name the first alternative's
errors where the API server picks the alternative with the most checks passed.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import Any

from regokite.structural.field_errors import (
    DUPLICATE,
    INVALID,
    OMITTED,
    REQUIRED,
    TOO_LONG,
    TOO_MANY,
    UNSUPPORTED,
    FieldError,
    go_float,
    go_json,
    go_quote,
)
from regokite.structural.formats import FORMATS, UNCHECKED
from regokite.structural.schema import Schema

CHECKED_FORMATS = (*FORMATS, *UNCHECKED)


def validate(value: Any, schema: Schema, path: str = "") -> list[FieldError]:
    """Every error of `value` against `schema`; `path` is where `value` sits (e.g. `spec.parameters`)."""
    return list(_node(value, schema, path))


def _node(value: Any, s: Schema, path: str) -> Iterable[FieldError]:
    types = _types(s)
    if value is None:
        if types and not s.nullable:
            yield _type_error(path, ",".join(types), "null")
        yield from _enum(value, s, path)
        return
    yield from _type(value, s, path, types)
    yield from _combinators(value, s, path)
    if isinstance(value, str):
        yield from _string(value, s, path)
        yield from _format(value, s, path)
    elif _is_number(value):
        yield from _number(value, s, path)
    elif isinstance(value, list):
        yield from _array(value, s, path)
    yield from _enum(value, s, path)
    if isinstance(value, dict):
        yield from _object(value, s, path)


def _types(s: Schema) -> tuple[str, ...]:
    if s.int_or_string:
        return ("integer", "string")
    return (s.type,) if s.type else ()


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _type(value: Any, s: Schema, path: str, types: tuple[str, ...]) -> Iterable[FieldError]:
    """The type validator: the value's JSON type is the schema's (an integral number passes as an
    integer, an integer as a number). Numeric formats are not checked (the API server drops them from a
    CRD's schema); a string format it checks makes a string or array pass any type but a numeric one."""
    kind = _json_type(value)
    if not types:
        return
    if s.format in CHECKED_FORMATS and kind in ("string", "array") and not {"number", "integer"} & set(types):
        return
    float_int = kind == "number" and float(value).is_integer() and "integer" in types
    if not (kind in types or float_int or (kind == "integer" and "number" in types)):
        yield _type_error(path, ",".join(types), kind)


def _type_error(path: str, expected: str, got: str) -> FieldError:
    return FieldError(path, INVALID, got, f"{path} in body must be of type {expected}: {go_quote(got)}")


def _combinators(value: Any, s: Schema, path: str) -> Iterable[FieldError]:
    """allOf, anyOf, oneOf and not, each over the same value at the same path. Their own errors are not
    field errors in the API server: it names no field for them (`<nil>`) and quotes the path."""
    if s.any_of:
        results = [list(_node(value, alt, path)) for alt in s.any_of]
        if all(results):
            yield _composite(f"{go_quote(path)} must validate at least one schema (anyOf)")
            yield from results[0]
    if s.one_of:
        results = [list(_node(value, alt, path)) for alt in s.one_of]
        valid = sum(1 for r in results if not r)
        if valid != 1:
            found = "Found none valid" if valid == 0 else f"Found {valid} valid alternatives"
            yield _composite(f"{go_quote(path)} must validate one and only one schema (oneOf). {found}")
            if valid == 0:
                yield from results[0]
    if s.all_of:
        results = [list(_node(value, alt, path)) for alt in s.all_of]
        for result in results:
            yield from result
        failed = sum(1 for r in results if r)
        if failed:
            none = ". None validated" if failed == len(results) else ""
            yield _composite(f"{go_quote(path)} must validate all the schemas (allOf){none}")
    if s.not_ is not None and not list(_node(value, s.not_, path)):
        yield _composite(f"{go_quote(path)} must not validate the schema (not)")


def _composite(message: str) -> FieldError:
    return FieldError("<nil>", INVALID, "", message)


def _string(value: str, s: Schema, path: str) -> Iterable[FieldError]:
    """maxLength, minLength, pattern: the first that fails (the API server's string validator stops there)."""
    if s.max_length is not None and len(value) > s.max_length:
        unit = "byte" if s.max_length == 1 else "bytes"
        yield FieldError(path, TOO_LONG, OMITTED, f"may not be more than {s.max_length} {unit}")
    elif s.min_length is not None and len(value) < s.min_length:
        yield FieldError(path, INVALID, value, f"{path} in body should be at least {s.min_length} chars long")
    elif s.pattern is not None and s.pattern.search(value) is None:
        yield FieldError(path, INVALID, value, f"{path} in body should match '{s.pattern.pattern}'")


def _format(value: str, s: Schema, path: str) -> Iterable[FieldError]:
    check = FORMATS.get(s.format)
    if check is not None and not check(value):
        yield FieldError(path, INVALID, value, f"{path} in body must be of type {s.format}: {go_quote(value)}")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number(value: int | float, s: Schema, path: str) -> Iterable[FieldError]:
    """multipleOf, then minimum, then maximum, as the API server's number validator reports them. An integer
    is compared with a bound cut to an integer; a value, or a bound, that is not integral under an integer
    type is an error of its own."""
    integer = s.type == "integer" and not s.int_or_string
    if integer and not _integral(value):
        yield _composite(f"Checked value must be of type integer (default format) in {path}")
    if s.multiple_of is not None and s.multiple_of > 0:
        native = yield from _bound_fits(s.multiple_of, integer, "MultipleOf", path)
        if native and isinstance(value, int):
            factor = int(s.multiple_of)
            failed, shown = factor != 0 and value % factor != 0, str(factor)
        else:
            quotient = value / s.multiple_of
            failed, shown = not float(quotient).is_integer(), _float(s.multiple_of)
        if failed:
            yield FieldError(path, INVALID, value, f"{path} in body should be a multiple of {shown}")
    for bound, exclusive, word, prefix in (
        (s.minimum, s.exclusive_minimum, "greater", "Minimum boundary"),
        (s.maximum, s.exclusive_maximum, "less", "Maximum boundary"),
    ):
        if bound is None:
            continue
        native = yield from _bound_fits(bound, integer, prefix, path)
        limit, shown = (int(bound), str(int(bound))) if native and isinstance(value, int) else (bound, _float(bound))
        beyond = value < limit if word == "greater" else value > limit
        if beyond or (exclusive and value == limit):
            relation = f"{word} than" if exclusive else f"{word} than or equal to"
            yield FieldError(path, INVALID, value, f"{path} in body should be {relation} {shown}")


def _bound_fits(bound: int | float, integer: bool, prefix: str, path: str) -> Generator[FieldError, None, bool]:
    """Whether a bound can be compared in the value's own type; an error when an integer type's is not integral."""
    if integer and not _integral(bound):
        yield _composite(f"{prefix} value must be of type integer (default format) in {path}")
        return False
    return True


def _integral(number: int | float) -> bool:
    return isinstance(number, int) or float(number).is_integer()


def _float(number: int | float) -> str:
    return go_float(float(number))


def _array(value: list[Any], s: Schema, path: str) -> Iterable[FieldError]:
    if s.items is not None:
        for i, item in enumerate(value):
            yield from _node(item, s.items, f"{path}[{i}]")
    if s.min_items is not None and len(value) < s.min_items:
        yield FieldError(path, INVALID, len(value), f"{path} in body should have at least {s.min_items} items")
    if s.max_items is not None and len(value) > s.max_items:
        unit = "item" if s.max_items == 1 else "items"
        yield FieldError(path, TOO_MANY, len(value), f"must have at most {s.max_items} {unit}")
    if s.unique_items and len({go_json(v) for v in value}) < len(value):
        yield FieldError(path, INVALID, "", f"{path} in body shouldn't contain duplicates")
    yield from _list_type(value, s, path)


def _list_type(value: list[Any], s: Schema, path: str) -> Iterable[FieldError]:
    """x-kubernetes-list-type: a `set` holds no value twice, a `map` no two items with the same keys."""
    seen: set[str] = set()
    for i, item in enumerate(value):
        if s.list_type == "set":
            key, shown = go_json(item), item
        elif s.list_type == "map" and isinstance(item, dict):
            shown = {k: item[k] for k in s.list_map_keys if k in item}
            key = go_json(shown)
        else:
            continue
        if key in seen:
            yield FieldError(f"{path}[{i}]", DUPLICATE, shown)
        seen.add(key)


def _enum(value: Any, s: Schema, path: str) -> Iterable[FieldError]:
    if not s.enum or any(_same(value, allowed) for allowed in s.enum):
        return
    supported = ", ".join(go_quote(a if isinstance(a, str) else go_json(a)) for a in s.enum)
    yield FieldError(path, UNSUPPORTED, value, f"supported values: {supported}")


def _same(value: Any, allowed: Any) -> bool:
    """Equal as Go compares a decoded value to an enum entry: numbers by value, nothing else converted."""
    if _is_number(value) and _is_number(allowed):
        return value == allowed
    return type(value) is type(allowed) and value == allowed


def _object(value: dict[str, Any], s: Schema, path: str) -> Iterable[FieldError]:
    count = len(value)
    if s.min_properties is not None and count < s.min_properties:
        yield FieldError(path, INVALID, count, f"{path} in body should have at least {s.min_properties} properties")
    if s.max_properties is not None and count > s.max_properties:
        unit = "item" if s.max_properties == 1 else "items"
        yield FieldError(path, TOO_MANY, count, f"must have at most {s.max_properties} {unit}")
    for key in sorted(value):
        if key in s.properties:
            continue
        if s.additional is False:
            yield FieldError(path, INVALID, key, f"{_join(path, key)} in body is a forbidden property")
        elif isinstance(s.additional, Schema):
            yield from _node(value[key], s.additional, _join(path, key))
    for key in sorted(s.properties):
        if key in value:
            yield from _node(value[key], s.properties[key], _join(path, key))
    for key in s.required:
        if key not in value:
            yield FieldError(_join(path, key), REQUIRED)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
