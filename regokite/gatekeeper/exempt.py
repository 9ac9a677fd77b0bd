"""Gatekeeper's namespace exemption flags and its namespace-label webhook.

`--exempt-namespace`, `--exempt-namespace-prefix` and `--exempt-namespace-suffix`
do not skip anything in process, as in Gatekeeper: they name the namespaces
allowed to carry the `admission.gatekeeper.sh/ignore` label, which the
validating webhook's namespaceSelector skips. The label webhook
(`check-ignore-label.gatekeeper.sh`, `/v1/admitlabel`) refuses the label on any
other Namespace, so the right to label a namespace is not the right to bypass
every constraint in it.
"""

from __future__ import annotations

from dataclasses import dataclass

from regokite.admission.review import Review, Verdict

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


def label_verdict(review: Review, exemptions: Exemptions) -> Verdict:
    """Gatekeeper's namespace-label check: only an exempt Namespace may carry the ignore label."""
    request = review.request
    kind = request.get("kind") or {}
    if review.operation == "DELETE" or kind.get("group") != "" or kind.get("kind") != "Namespace":
        return Verdict()
    obj = review.object if isinstance(review.object, dict) else {}
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    name = metadata.get("name") if isinstance(metadata.get("name"), str) else ""
    labels = metadata.get("labels") if isinstance(metadata.get("labels"), dict) else {}
    if exemptions.exempts(name) or IGNORE_LABEL not in labels:
        return Verdict()
    return Verdict(allowed=False, messages=[f"Only exempt namespace can have the {IGNORE_LABEL} label"])
