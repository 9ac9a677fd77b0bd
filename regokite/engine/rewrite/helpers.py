"""Rego the stages append to a module: the helper texts (rego/*.rego) and how placed helpers are named.

Each helper is written once, in Rego v1 (`rego/<name>.rego`, `$placeholders`
filled by `string.Template`); a v0 module gets the same rules with the `if`
before each body left out, which regorus's v0 parser reads as the same rule
(`f(a) := x { ... } else := y`). A helper for one place (an arithmetic
operator, a routed builtin's call) is placed: its lines map back to that
place (`edits.Redirect`), so its errors are located where OPA locates them.
Its name, `<kind>_<tag>_<n>`, says what it is; the tag is the module's own,
so that helpers appended to two modules of one package do not clash.
"""

from __future__ import annotations

import functools
import re
import zlib
from importlib import resources
from string import Template

from regokite.bundle import Module
from regokite.engine.extensions.internal import TEXT
from regokite.engine.rewrite.edits import Change, position
from regokite.engine.rewrite.tree import Node, fcn_name

PLACED = re.compile(r"(?P<kind>__rk_(?:b_\w+|ar_[a-z]+|lt|le|gt|ge|text))_[0-9a-f]{8}_[0-9]+")
_PLACED_NUMBER = re.compile(rb"\n__rk_\w+_[0-9a-f]{8}_([0-9]+)\(")
_V1_BODY = re.compile(r" if \{\n")


@functools.cache
def _template(name: str) -> Template:
    return Template(resources.files("regokite.engine.rewrite").joinpath("rego", f"{name}.rego").read_text("utf-8"))


def rego(template: str, v0: bool, /, **values: object) -> str:
    """The helper text `rego/<template>.rego` with its placeholders filled, in the module's syntax."""
    text = _template(template).substitute(values)
    return _V1_BODY.sub(" {\n", text) if v0 else text


def operands(arity: int) -> str:
    """A helper's operand names: `a0, a1, ...`."""
    return ", ".join(f"a{i}" for i in range(arity))


def tag(module: Module, identity: int) -> str:
    """A name part of the module's own (`identity`: its place in the bundle), so that helpers appended
    to modules of one package do not clash, even two modules of one file."""
    return format(zlib.crc32(f"{module.path}\0{identity}".encode()), "08x")


def placed_name(kind: str, module_tag: str, number: int) -> str:
    return f"{kind}_{module_tag}_{number}"


def next_number(source: bytes) -> int:
    """A number no helper placed in `source` has (rewrites run in rounds, each adding helpers)."""
    return max((int(n) for n in _PLACED_NUMBER.findall(source)), default=-1) + 1


def first_free(source: bytes) -> int:
    """A number no variable a stage bound in `source` (`__rk<n>__`) has."""
    used = [int(n) for n in re.findall(rb"__rk(\d+)__", source)]
    return max(used, default=-1) + 1


def written(value: str, names: list[str]) -> str:
    """Rego for `value` (a variable) as OPA writes it in text (sprintf's `%v`, a template string): regorus's
    `%v`, which writes values as OPA but an empty set (`{}`, OPA's `set()`): where the text holds `{}`,
    internal.TEXT says whether an empty set is there (`names`: four fresh variables)."""
    w, t, p, v = names
    return (
        f'array.concat([{w} | {w} := sprintf("%v", [{value}]); not contains({w}, "{{}}")], '
        f'[{w} | {t} := sprintf("%v", [{value}]); contains({t}, "{{}}"); '
        f"{w} := {TEXT}({t}, [count({p}) | walk({value}, [{p}, {v}]); {v} == set()])])[0]"
    )


def called(call: Node) -> str:
    """The name a call ends with, a placed helper's by its kind (`data.p.__rk_b_count_<tag>_<n>`: `__rk_b_count`)."""
    name = (fcn_name(call) or "").rpartition(".")[2]
    found = PLACED.fullmatch(name)
    return found["kind"] if found else name


def placed(source: bytes, text: str, at: int) -> Change:
    """`text` (a helper's definition) appended to the module, its errors located at offset `at`."""
    return Change(len(source), len(source), text.encode(), position(source, at))


def appended(source: bytes, text: str) -> Change:
    """`text` (helpers shared by the module's places) appended to the module."""
    return Change(len(source), len(source), text.encode())
