"""ConstraintTemplates written as YAML text, for the tests that load a file with one in it."""

from __future__ import annotations

import textwrap


def template_yaml(kind: str, rego: str, api_version: str = "templates.gatekeeper.sh/v1") -> str:
    """A ConstraintTemplate named `kind` lower-cased, its admission target's module `rego` (a literal
    block, so that a test can name the line a statement stands on)."""
    return (
        f"apiVersion: {api_version}\n"
        "kind: ConstraintTemplate\n"
        "metadata:\n"
        f"  name: {kind.lower()}\n"
        "spec:\n"
        "  crd:\n"
        "    spec:\n"
        "      names:\n"
        f"        kind: {kind}\n"
        "  targets:\n"
        "    - target: admission.k8s.gatekeeper.sh\n"
        "      rego: |\n" + textwrap.indent(rego, " " * 8)
    )
