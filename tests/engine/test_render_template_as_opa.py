"""strings.render_template beside OPA's evaluator (tests/opa_oracle.py), for the template language the
embedded engine renders; the rest is refused (an error where OPA answers). Refused at load on the
code before. The rendered cases, compared with OPA's answer, are in same_as_opa.yaml
(`builtins/strings.render_template`)."""

from __future__ import annotations

import opa_oracle
import pytest

from regokite.bundle import Bundle, Module
from regokite.engine.embedded import EmbeddedEngine
from regokite.errors import EvaluationError, EvaluationRefused

RULE = "package p\n\nx := strings.render_template(input.t, input.v)\n"


@pytest.mark.parametrize("template", ["{{len .a}}", '{{.s | printf "%q"}}', "{{with .s}}{{.}}{{end}}", "{{.nul}}"])
def test_what_is_not_rendered_here_is_refused(template: str) -> None:
    with pytest.raises(EvaluationError, match="not rendered as Go's text/template here"):
        EmbeddedEngine(Bundle((Module("p.rego", RULE),))).evaluate("data.p.x", {"t": template, "v": {"nul": None}})


def test_a_missing_key_is_refused_where_opa_versions_differ() -> None:
    """OPA 1.20 (the oracle) prints `<undefined>`, the conformance suite's OPA errs (rendertemplate/missingkey):
    an error in both modes (was a builtin error, undefined under OPA's default evaluation)."""
    rule = "package p\n\nx := strings.render_template(input.t, input.v)\n"
    assert opa_oracle.both(rule, {"t": "{{.a}}", "v": {"k": "v"}})[1] == "<undefined>"
    with pytest.raises(EvaluationError, match="OPA versions differ") as caught:
        EmbeddedEngine(Bundle((Module("p.rego", rule),))).evaluate("data.p.x", {"t": "{{.a}}", "v": {"k": "v"}})
    assert isinstance(caught.value, EvaluationRefused)  # a refusal stays an error in OPA's default mode too
