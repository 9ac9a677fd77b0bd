"""Template strings (`$"... {expr} ..."`) as OPA's internal.template_string joins them.

The rewrite (engine.rewrite.templates) passes the parts in order: a literal
part as a string, an expression's part as the set of its values, each
already written to text in Rego (a string as it is, any other value as
Rego writes it). OPA writes no value as `<undefined>`, and refuses more than
one (an evaluation error in every mode, as OPA's conflict error).
"""

from __future__ import annotations

from regokite.engine.extensions.common import BuiltinError, Conflict, Refusal

_NAME = "internal.template_string"


def template(parts: object) -> str:
    if not isinstance(parts, list):
        raise BuiltinError(f"{_NAME}: operand 1 must be array")
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, set | frozenset) and len(part) <= 1 and all(isinstance(v, str) for v in part):
            out.append(next(iter(part)) if part else "<undefined>")
        elif isinstance(part, set | frozenset) and len(part) > 1:
            raise Conflict("template-strings must not produce multiple outputs")
        else:
            raise BuiltinError(f"{_NAME}: a part is neither text nor the set of an expression's values")
    return "".join(out)


def text(written: object, empty_sets: object) -> str:
    """A value's text as OPA writes it, from regorus's `%v` text of it (`written`) and the depth of every
    empty set in it: regorus writes an empty set as `{}`, OPA as `set()`. The value itself an empty set is
    OPA's `set()`; one inside a collection is refused (its `{}` cannot be told from an empty object's)."""
    if not isinstance(written, str) or not isinstance(empty_sets, list):
        raise BuiltinError("text: operands must be a string and an array")
    if not empty_sets:
        return written
    if empty_sets == [0]:
        return "set()"
    raise Refusal(
        "a value holding an empty set inside a collection, which the embedded engine writes as {} where OPA "
        "writes set(), was to be written as text (sprintf's %v, a template string): use --engine opa"
    )
