"""`regokite controller`: load policies and definitions, check them, run the controllers."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from regokite import outline
from regokite.bundle import load_bundle
from regokite.controllers import customize, decorator, definitions
from regokite.controllers.hooks import RESPONSE_FIELDS, ResolvedHook, resolve_hook
from regokite.engine import Engine, open_engine
from regokite.engine.extensions import ExtensionOptions
from regokite.kube.actuator import Actuator
from regokite.kube.client import KubeClient
from regokite.kube.composite import CompositeRunner
from regokite.kube.decorator import DecoratorRunner
from regokite.kube.discovery import Discovery
from regokite.kube.leader import LeaderSettings
from regokite.kube.manager import Manager
from regokite.kube.watch import build_watches

log = logging.getLogger("regokite.controller")


@dataclass
class ControllerSettings:
    policies: list[str]
    controllers: list[str]
    kubeconfig: str | None = None
    namespace: str | None = None
    workers: int = 2
    engine: str = "embedded"
    opa_url: str | None = None
    v0_compatible: bool = False
    metrics_port: int | None = None
    metrics_host: str = "0.0.0.0"
    discovery_wait: float = 30.0
    extra: dict[str, str] = field(default_factory=dict)
    vars: list[str] = field(default_factory=list)  # --var KEY=VALUE / WATCH/KEY=VALUE: Watch params
    field_manager: str = "regokite"
    leader: LeaderSettings | None = None  # --leader-elect
    extensions: ExtensionOptions = field(default_factory=ExtensionOptions)  # --allow-http-send


def load_hooks(
    policies: list[str],
    controllers: list[str],
    *,
    v0_compatible: bool,
    engine: str = "embedded",
    opa_url=None,
    options: ExtensionOptions | None = None,
) -> tuple[definitions.Definitions, Engine, dict[str, tuple[ResolvedHook, ResolvedHook | None, ResolvedHook | None]]]:
    """Definitions (each file read once), an engine over the policies, and every hook checked against them."""
    loaded = definitions.load(controllers)
    bundle = load_bundle(policies, v0_compatible=v0_compatible).without_tests()
    packages = outline.packages(outline.outline(bundle.modules))
    hooks = {}
    for d in loaded.controllers:
        fields = decorator.RESPONSE_FIELDS if isinstance(d, decorator.DecoratorController) else RESPONSE_FIELDS
        sync = resolve_hook(d.hooks.sync, packages, fields)
        finalize = resolve_hook(d.hooks.finalize, packages, fields) if d.hooks.finalize else None
        custom = d.hooks.customize
        hooks[d.name] = (sync, finalize, resolve_hook(custom, packages, customize.RESPONSE_FIELDS) if custom else None)
    return loaded, open_engine(bundle, engine, opa_url=opa_url, options=options), hooks


def build(settings: ControllerSettings) -> tuple[Manager, list[CompositeRunner]]:
    loaded, engine, hooks = load_hooks(
        settings.policies,
        settings.controllers,
        v0_compatible=settings.v0_compatible,
        engine=settings.engine,
        opa_url=settings.opa_url,
        options=settings.extensions,
    )
    client = KubeClient(settings.kubeconfig, pool_size=max(16, settings.workers * 4 + 16))
    manager = Manager(client, namespace=settings.namespace, workers=settings.workers)
    discovery = Discovery(client)
    actuator = Actuator(client, settings.field_manager)

    def common(d: Any) -> dict[str, Any]:
        sync, finalize, customize = hooks[d.name]
        return {
            "manager": manager,
            "engine": engine,
            "actuator": actuator,
            "sync_hook": sync,
            "finalize_hook": finalize,
            "customize_hook": customize,
            "discovery": discovery,
            "discovery_wait": settings.discovery_wait,
        }

    runners = [CompositeRunner(d, **common(d)) for d in loaded.composites]
    for d in loaded.decorators:
        deco = DecoratorRunner(d, **common(d))
        log.info(
            "decorator loaded",
            extra={
                "controller": d.name,
                "resources": [t.type.key for t in deco.targets],
                "attachments": [t.key for t in deco.attachment_types],
                "sync": deco.sync_hook.package,
            },
        )
    build_watches(
        loaded.watches,
        settings.vars,
        manager=manager,
        engine=engine,
        actuator=actuator,
        discovery=discovery,
        discovery_wait=settings.discovery_wait,
    )
    for r in runners:
        log.info(
            "controller loaded",
            extra={
                "controller": r.name,
                "parent": r.parent_type.key,
                "children": [t.key for t in r.child_types],
                "sync": r.sync_hook.package,
                "finalize": r.finalize_hook.package if r.finalize_hook else None,
            },
        )
    return manager, runners


def serve(settings: ControllerSettings) -> int:
    manager, _ = build(settings)
    if settings.leader is not None:
        manager.use_leader_election(settings.leader.elector(settings.kubeconfig))
    return manager.run(metrics_port=settings.metrics_port, metrics_host=settings.metrics_host)
