"""Gatekeeper's namespace exemption flags and its namespace-label webhook.

`--exempt-namespace`, `--exempt-namespace-prefix` and `--exempt-namespace-suffix`
do not skip anything in process, as in Gatekeeper: they name the namespaces
allowed to carry the `admission.gatekeeper.sh/ignore` label, which the
validating webhook's namespaceSelector skips. The label webhook
(`check-ignore-label.gatekeeper.sh`, `/v1/admitlabel`) refuses the label on any
other Namespace, so the right to label a namespace is not the right to bypass
every constraint in it. `regokite.admission.decide.label_verdict` answers that
webhook's reviews.
"""

from __future__ import annotations

from dataclasses import dataclass

IGNORE_LABEL = "admission.gatekeeper.sh/ignore"
LABEL_WEBHOOK_PATH = "/v1/admitlabel"


@dataclass(frozen=True)
class Exemptions:
    names: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()

    def exempts(self, namespace: str) -> bool:
        return (
            namespace in self.names
            or any(namespace.startswith(p) for p in self.prefixes)
            or any(namespace.endswith(s) for s in self.suffixes)
        )

    def patterns(self) -> list[str]:
        """As Gatekeeper lists them for matching: names, `prefix*`, `*suffix`."""
        return sorted([*self.names, *(f"{p}*" for p in self.prefixes), *(f"*{s}" for s in self.suffixes)])
