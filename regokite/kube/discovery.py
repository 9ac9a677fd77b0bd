"""API discovery: `group/version` + plural resource -> kind, scope, status subresource."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from regokite.errors import RegokiteError
from regokite.kube.client import ApiError, KubeClient
from regokite.resources import ChildType

log = logging.getLogger("regokite.controller")


class DiscoveryError(RegokiteError):
    pass


class Discovery:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._lock = threading.Lock()
        self._cache: dict[str, dict[str, dict]] = {}

    def _resources(self, api_version: str, refresh: bool) -> dict[str, dict]:
        with self._lock:
            if not refresh and api_version in self._cache:
                return self._cache[api_version]
        path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        try:
            listing = self.client.get(path)
        except ApiError as exc:
            if exc.status == 404:
                raise DiscoveryError(f"the API server does not serve {api_version}") from None
            raise
        resources = {r["name"]: r for r in listing.get("resources", [])}
        with self._lock:
            self._cache[api_version] = resources
        return resources

    def resolve(self, api_version: str, resource: str, *, wait: float = 0.0) -> ChildType:
        """Kind and scope of `resource` in `api_version`; retries up to `wait` seconds
        (a CRD applied just before the controller starts may not be served yet)."""

        def attempt(refresh: bool) -> ChildType:
            resources = self._resources(api_version, refresh)
            if resource not in resources:
                served = ", ".join(sorted(resources)) or "none"
                raise DiscoveryError(f"{api_version} has no resource {resource!r} (it has: {served})")
            r = resources[resource]
            return ChildType(
                api_version=api_version,
                resource=resource,
                kind=r["kind"],
                namespaced=bool(r.get("namespaced")),
                status_subresource=f"{resource}/status" in resources,
            )

        return _retrying(attempt, api_version, resource, wait)

    def resolve_kind(self, api_version: str, kind: str, *, wait: float = 0.0) -> ChildType:
        """Like `resolve`, from a kind (`Deployment`) instead of the plural resource name."""

        def attempt(refresh: bool) -> ChildType:
            for name, r in self._resources(api_version, refresh).items():
                if r.get("kind") == kind and "/" not in name:
                    return self.resolve(api_version, name)
            raise DiscoveryError(f"{api_version} has no kind {kind!r}")

        return _retrying(attempt, api_version, kind, wait)


def _retrying(attempt: Callable[[bool], ChildType], api_version: str, name: str, wait: float) -> ChildType:
    """Call `attempt` until it resolves or `wait` seconds pass, saying once that it waits."""
    group = api_version.rpartition("/")[0]
    custom = "." in group and not group.endswith(".k8s.io")
    hint = " (is its CustomResourceDefinition installed?)" if custom else ""
    deadline = time.monotonic() + wait
    refresh = False
    while True:
        try:
            return attempt(refresh)
        except DiscoveryError as exc:
            if time.monotonic() >= deadline:
                raise DiscoveryError(f"{exc}{hint}") from None
            if not refresh:
                log.info(f"waiting up to {wait:.0f}s for the API server to serve {api_version} {name}{hint}")
        refresh = True
        time.sleep(0.5)
