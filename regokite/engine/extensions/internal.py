"""The names of the builtins regokite adds for its rewriter's own use (engine.rewrite writes calls of
them); never called by a policy. What each is and does is the table `extensions.INTERNAL`, which both
`install` and `provided` read."""

from __future__ import annotations

ARITH = "__regokite_arith"  # + - * / as OPA where regorus's doubles may not answer (rewrite.arithmetic)
NUMBER_TEXT = "__regokite_number_text"  # to_number of a string, from regorus's number's text (rewrite.routes)
REPLACE_EMPTY = "__regokite_replace_empty"  # replace(s, "", x) as Go's strings.Replacer (rewrite.routes)
SPRINTF = "__regokite_sprintf"  # sprintf as Go's fmt (rewrite.sprintf)
STRLEN = "__regokite_strlen"  # a string's length in characters: count of a string (rewrite.routes)
UNORDERED = "__regokite_unordered"  # sort, min, max and < where regorus would order otherwise (rewrite.routes)
YAML_PLAIN = "__regokite_yaml_plain"  # whether regorus writes a value as YAML as OPA does (rewrite.routes)
YAML_SINGLE = "__regokite_yaml_single"  # whether regorus reads a YAML text as OPA: one document (rewrite.routes)
HTTP_SEND_OFF = "__regokite_http_send_off"  # http.send whose tests replace it, hosts not allowed (rewrite.routes)
FAIL = "__regokite_builtin_error"  # a builtin's error where regorus is undefined and OPA errs (rewrite.routes)
TEMPLATE = (
    "__regokite_template"  # a template string's parts joined as OPA's internal.template_string (rewrite.templates)
)
TEXT = "__regokite_text"  # a value's %v text, where regorus wrote an empty set as {} (rewrite.helpers.written)
LENIENT = "__regokite_lenient"  # a builtin call made undefined where it errs (rewrite.lenient)
