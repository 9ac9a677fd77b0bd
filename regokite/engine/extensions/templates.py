"""strings.render_template as OPA (Go's text/template), for the part of the
template language written here: text, `{{.a.b}}`, `{{$v}}` and `{{$v.a}}`, `{{if}}`/`{{else}}`,
`{{range}}` (with `$i, $e :=` or `$e :=`, and `{{else}}`), `{{end}}`, comments and `{{-`/`-}}`
trimming. Anything else (functions, pipes, `with`, `define`, literals, ...) is an error saying so
rather than a guess at Go's answer.

Values print as Go prints OPA's: a string as itself, an integer as its digits, a boolean, an array
as `[a b]`, an object as `map[k:v]` (keys sorted). A number that is not an integer is refused (OPA
prints the text it was written as), and so are a null printed alone and a missing key (OPA 1.20
prints `<undefined>` for both, the conformance suite's OPA errs on a missing key). Truth is Go's: a
number, even 0, is true (OPA hands it over as text), a range's index 0 is false, an empty string,
array or object is false.
"""

from __future__ import annotations

import re
from typing import Any

from regokite.engine.extensions.common import BuiltinError, Refusal, builtin, object_operand, string_operand

NAME = "strings.render_template"
_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.DOTALL)
_FIELDS = re.compile(r"(?:(\$\w*)((?:\.[A-Za-z_]\w*)*)|((?:\.[A-Za-z_]\w*)+|\.))$")
_RANGE = re.compile(r"range\s+(?:(\$\w+)\s*(?:,\s*(\$\w+))?\s*:=\s*)?(\S+)$")


class _Node:
    def __init__(self, kind: str, text: str = "", body: list[_Node] | None = None) -> None:
        self.kind, self.text, self.body = kind, text, body or []
        self.otherwise: list[_Node] = []


def _unsupported(what: str) -> Refusal:
    return Refusal(f"{NAME}: {what} is not rendered as Go's text/template here: use --engine opa")


def _tokens(template: str) -> list[tuple[str, str]]:
    """("text", t) and ("action", a) in order, with Go's trimming applied."""
    out: list[tuple[str, str]] = []
    position = 0
    for match in _ACTION.finditer(template):
        text = template[position : match.start()]
        if match.group(1):
            text = text.rstrip(" \t\r\n")
        if out and out[-1][0] == "trim":
            out.pop()
            text = text.lstrip(" \t\r\n")
        out.append(("text", text))
        out.append(("action", match.group(2).strip()))
        if match.group(3):
            out.append(("trim", ""))
        position = match.end()
    if "{{" in template[position:]:
        raise BuiltinError(f"{NAME}: template: template:1: unclosed action")
    text = template[position:]
    if out and out[-1][0] == "trim":
        out.pop()
        text = text.lstrip(" \t\r\n")
    out.append(("text", text))
    return out


def _parse(tokens: list[tuple[str, str]]) -> list[_Node]:
    root = _Node("root")
    open_nodes, targets = [root], [root.body]  # the if/range being read, and the list it fills now
    for kind, text in tokens:
        if kind == "text":
            if text:
                targets[-1].append(_Node("text", text))
            continue
        if text.startswith("/*") and text.endswith("*/"):
            continue
        word = text.split(None, 1)[0] if text else ""
        if word in ("if", "range"):
            node = _Node(word, text[len(word) :].strip() if word == "if" else text)
            targets[-1].append(node)
            open_nodes.append(node)
            targets.append(node.body)
        elif text == "else" and len(open_nodes) > 1:
            targets[-1] = open_nodes[-1].otherwise
        elif text == "end" and len(open_nodes) > 1:
            open_nodes.pop()
            targets.pop()
        elif _FIELDS.match(text):
            targets[-1].append(_Node("print", text))
        else:
            raise _unsupported(f"the action {{{{{text}}}}}")
    if len(open_nodes) > 1:
        raise BuiltinError(f"{NAME}: template: template:1: unexpected EOF")
    return root.body


def _value(text: str, dot: Any, variables: dict[str, Any]) -> Any:
    match = _FIELDS.match(text)
    if match is None:
        raise _unsupported(f"the pipeline {text!r}")
    name, variable_path, dot_path = match.groups()
    path = variable_path if name is not None else dot_path
    if name is not None:
        if name not in variables:
            raise BuiltinError(f'{NAME}: template: template:1: undefined variable "{name}"')
        value = variables[name]
    else:
        value = dot
    for field in (path or "").split(".")[1:]:
        if not field:
            continue
        if not isinstance(value, dict):
            raise BuiltinError(f"{NAME}: template: can't evaluate field {field}")
        if field not in value:  # OPA 1.20 prints <undefined>, the conformance suite's OPA errs
            raise Refusal(
                f'{NAME}: the key "{field}" is missing, where OPA versions differ (1.20 prints <undefined>, '
                "others err): use --engine opa"
            )
        value = value[field]
    return value


class _Index(int):
    """A range's index: a Go int (false when 0), where OPA's numbers reach the template as text."""


def _printed(value: Any, top: bool = True) -> str:
    if value is None:
        if top:  # OPA 1.20 answers undefined, later ones may print it: not guessed here
            raise _unsupported("a null value")
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        raise _unsupported(f"the number {value!r} (OPA prints its text as written)")
    if isinstance(value, int | str):
        return str(value)
    if isinstance(value, list):
        return "[" + " ".join(_printed(v, False) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_printed(value[k], False)}" for k in sorted(value)) + "]"
    raise _unsupported(f"a {type(value).__name__}")


def _true(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, _Index):
        return value != 0
    if isinstance(value, int | float):
        return True  # OPA hands numbers over as text (json.Number): never empty
    return value is not None and bool(value)


def _render(nodes: list[_Node], dot: Any, variables: dict[str, Any], out: list[str]) -> None:
    for node in nodes:
        if node.kind == "text":
            out.append(node.text)
        elif node.kind == "print":
            out.append(_printed(_value(node.text, dot, variables)))
        elif node.kind == "if":
            chosen = node.body if _true(_value(node.text, dot, variables)) else node.otherwise
            _render(chosen, dot, variables, out)
        else:
            _range(node, dot, variables, out)


def _range(node: _Node, dot: Any, variables: dict[str, Any], out: list[str]) -> None:
    match = _RANGE.match(node.text)
    if match is None:
        raise _unsupported(f"the action {{{{{node.text}}}}}")
    first, second, pipeline = match.groups()
    collection = _value(pipeline, dot, variables)
    if isinstance(collection, list):
        pairs: list[tuple[Any, Any]] = [(_Index(i), e) for i, e in enumerate(collection)]
    elif isinstance(collection, dict):
        pairs = [(k, collection[k]) for k in sorted(collection)]
    else:
        raise _unsupported(f"range over {_printed(collection)!r}")
    if not pairs:
        _render(node.otherwise, dot, variables, out)
    for key, element in pairs:
        scope = dict(variables)
        if second is not None:
            scope[first], scope[second] = key, element
        elif first is not None:
            scope[first] = element
        _render(node.body, element, scope, out)


@builtin(NAME)
def render_template(template: Any, variables: Any) -> str:
    text = string_operand(NAME, template, 1)
    values = object_operand(NAME, variables, 2)
    out: list[str] = []
    _render(_parse(_tokens(text)), values, {"$": values}, out)
    return "".join(out)
