"""Policy sources checked when they are applied: what a server would refuse is refused at the API server.

Beside Gatekeeper's objects (regokite.gatekeeper.policy_objects, at `/validate`), the admission server
answers a webhook of its own for the other objects regokite loads from the cluster (`/v1/admitsource`):

* a ConfigMap labelled `openpolicyagent.org/policy=rego` or `openpolicyagent.org/data=opa` in a namespace
  the server follows (`--policy-namespaces`): parsed and compiled beside the ConfigMaps it serves now,
  by the sync's own loader (`configmap_policies.refusal`): what the sync would refuse, with its
  file:line:col;
* a CompositeController, DecoratorController or Watch: parsed as the controller parses one read from the
  API server, its hooks resolved against the policies this server serves (a package that is missing, or
  that defines none of the hook's response rules, is refused with the controller's own words).

A refused object never reaches the servers; one that gets there anyway (the webhook down or not
registered) is refused there, and the last good version keeps serving, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regokite import outline
from regokite.bundle import Bundle
from regokite.controllers import definitions
from regokite.controllers.cluster_definitions import as_written
from regokite.controllers.process import resolve_hooks
from regokite.controllers.watch import decisions as watch
from regokite.engine import EngineSettings
from regokite.errors import RegokiteError
from regokite.sources import configmap_policies

WEBHOOK_PATH = "/v1/admitsource"  # registered by regokite.manifests.webhooks.policy_source_configuration
DEFINITION_KINDS = {
    (definitions.API_GROUP, "CompositeController"),
    (definitions.API_GROUP, "DecoratorController"),
    (watch.API_GROUP, "Watch"),
}


@dataclass(frozen=True)
class SourceChecks:
    """What the admission server checks at `/v1/admitsource`. `configmaps`: the directory its ConfigMap sync
    writes (None: it follows no ConfigMaps, and checks none), in `namespaces` (`*`: every one)."""

    engine: EngineSettings
    configmaps: Path | None = None
    namespaces: tuple[str, ...] = ()

    def refusal(self, request: Mapping[str, Any], served: Bundle) -> str | None:
        """Why this AdmissionRequest's object would not load (None: it would, or it is none of these);
        `served`: the policies the server serves now, where hooks must be found."""
        kind = request.get("kind") if isinstance(request.get("kind"), dict) else {}
        obj = request.get("object")
        if request.get("operation") not in ("CREATE", "UPDATE") or not isinstance(obj, dict):
            return None
        group, kind_name = kind.get("group"), kind.get("kind")
        if (group, kind_name) == ("", "ConfigMap"):
            return self._configmap(obj, str(request.get("namespace") or ""))
        if (group, kind_name) in DEFINITION_KINDS:
            return definition_refusal(obj, served)
        return None

    def _configmap(self, obj: dict[str, Any], namespace: str) -> str | None:
        if self.configmaps is None or ("*" not in self.namespaces and namespace not in self.namespaces):
            return None
        obj = {**obj, "metadata": {**(obj.get("metadata") or {}), "namespace": namespace}}
        return configmap_policies.refusal(obj, configmap_policies.written(self.configmaps), self.engine)


def definition_refusal(obj: dict[str, Any], served: Bundle) -> str | None:
    """A CompositeController, DecoratorController or Watch as the controller would take it from the API
    server: its problems, or why its hooks do not resolve in `served`."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    kind, name = str(obj.get("kind")), str(meta.get("name", ""))
    where = f"{kind.lower()}/{meta['namespace']}/{name}" if meta.get("namespace") else f"{kind.lower()}/{name}"
    problems: list[str] = []
    written = as_written({**obj, "metadata": meta})
    parsed = (watch.parse_watch if kind == "Watch" else definitions.parse_definition)(written, where, problems)
    if problems or parsed is None:
        return "; ".join(problems) or f"{where}: not a definition"
    outlines = outline.outline(served.without_tests().modules)
    packages, files = outline.packages(outlines), outline.package_files(outlines)
    try:
        if isinstance(parsed, watch.Watch):
            watch.resolve_outputs(parsed.package, packages)
        else:
            resolve_hooks(parsed, packages, files)
    except RegokiteError as exc:  # HookError among them
        return f"{where}: {exc}"
    return None
