"""A CompositeRunner over one parent resource whose children are ConfigMaps, its hooks evaluated in
process: built one way for the runner tests (over the in-memory API server) and the integration tests
that run one sync at a time on a real one."""

from __future__ import annotations

from typing import Any

from regokite.controllers.composite.runner import CompositeRunner
from regokite.controllers.definitions import CompositeController, ParentResource
from regokite.controllers.hooks import LocalHooks, ResolvedHook
from regokite.controllers.schema import ChildResource, Hooks, HookTarget
from regokite.kube.actuator import Actuator
from regokite.kube.discovery import Discovery
from regokite.runtime.manager import Manager
from tests.kube_api.fake import ScriptedEngine


def configmap_runner(
    client: Any,
    engine: ScriptedEngine,
    parent: ParentResource,
    *,
    name: str,
    package: str,
    rules: tuple[str, ...] = ("children", "status"),
    update_method: str = "InPlace",
    finalize: bool = False,
    namespace: str | None = None,
) -> CompositeRunner:
    """`client`: a KubeClient or tests.kube_api.fake.FakeKube; `package` answers the sync hook (and
    the finalize hook with `finalize`), its `rules` asked; `namespace`: the manager watches only it."""
    target = HookTarget(package)
    definition = CompositeController(
        name=name,
        parent=parent,
        children=(ChildResource("v1", "configmaps", update_method=update_method),),
        hooks=Hooks(sync=target, finalize=target if finalize else None),
        generate_selector=True,
    )
    hook = ResolvedHook(target, rules=rules)
    return CompositeRunner(
        definition,
        manager=Manager(client, namespace=namespace),
        evaluator=LocalHooks(engine),  # type: ignore[arg-type]
        actuator=Actuator(client),
        sync_hook=hook,
        finalize_hook=hook if finalize else None,
        discovery=Discovery(client),
    )
