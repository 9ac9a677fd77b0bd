"""The extension builtins' one registry (extensions.common.builtin): each builtin's number of operands,
taken from its function's signature, is the one OPA 1.20.2 declares for it (regorus calls an extension
with exactly the arity it was added with); a signature that cannot say it, or a name registered twice,
fails at import rather than install a builtin regorus calls wrongly."""

from __future__ import annotations

import re
from typing import Any

import pytest
from opa_bindings import OpaEngine
from opa_bindings.engine import OpaError

from regokite.engine.extensions import arities
from regokite.engine.extensions.common import BUILTINS, builtin

# OPA's type error for a call with the wrong number of operands: "want: (x: string, delimiter: string, n: number)"
_WANT = re.compile(r"want: \((?P<operands>.*)\)")


def _declared_arity(name: str) -> int:
    """OPA's declared number of operands of `name`, from its arity error on a call with none."""
    opa = OpaEngine()
    try:
        opa.add_policy("p.rego", f"package p\n\nx if {name}()\n")
        opa.eval_query("true")
    except OpaError as exc:
        found = _WANT.search(str(exc))
        assert found, f"{name}: {exc}"
        return len(_top_level_items(found["operands"]))
    finally:
        opa.close()
    return 0  # a call with no operands compiled: it takes none


def _top_level_items(text: str) -> list[str]:
    """`x: string, y: any<number, string>` -> its two items (commas inside <>, [] or () are a type's)."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "<[(":
            depth += 1
        elif char in ">])":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item for item in items if item.strip()]


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_each_builtins_arity_is_opas(name: str) -> None:
    assert arities()[name] == BUILTINS[name][0] == _declared_arity(name)


def test_a_signature_that_does_not_say_its_operands_needs_arity() -> None:
    def variadic(*operands: Any) -> Any:
        return operands

    with pytest.raises(TypeError, match="give arity="):
        builtin("test.variadic")(variadic)
    assert "test.variadic" not in BUILTINS


def test_a_name_registered_twice_is_refused() -> None:
    refusal = "extension builtin upper: registered by regokite.engine.extensions.strings and again by"
    with pytest.raises(ValueError, match=re.escape(refusal)):
        builtin("upper")(lambda value: value)
    assert BUILTINS["upper"][1].__module__ == "regokite.engine.extensions.strings"
