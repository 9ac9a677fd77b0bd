"""API discovery: `group/version` + plural resource -> kind, scope, status subresource."""

from __future__ import annotations

import threading
import time

from regokite.controllers.hooks import ChildType
from regokite.errors import RegokiteError
from regokite.kube.client import ApiError, KubeClient


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
        deadline = time.monotonic() + wait
        refresh = False
        while True:
            try:
                resources = self._resources(api_version, refresh)
                if resource in resources:
                    r = resources[resource]
                    return ChildType(
                        api_version=api_version,
                        resource=resource,
                        kind=r["kind"],
                        namespaced=bool(r.get("namespaced")),
                        status_subresource=f"{resource}/status" in resources,
                    )
                problem = DiscoveryError(
                    f"{api_version} has no resource {resource!r} (it has: {', '.join(sorted(resources)) or 'none'})"
                )
            except DiscoveryError as exc:
                problem = exc
            if time.monotonic() >= deadline:
                raise problem
            refresh = True
            time.sleep(0.5)

    def resolve_kind(self, api_version: str, kind: str, *, wait: float = 0.0) -> ChildType:
        """Like `resolve`, from a kind (`Deployment`) instead of the plural resource name."""
        deadline = time.monotonic() + wait
        refresh = False
        while True:
            try:
                resources = self._resources(api_version, refresh)
                for name, r in resources.items():
                    if r.get("kind") == kind and "/" not in name:
                        return self.resolve(api_version, name)
                problem = DiscoveryError(f"{api_version} has no kind {kind!r}")
            except DiscoveryError as exc:
                problem = exc
            if time.monotonic() >= deadline:
                raise problem
            refresh = True
            time.sleep(0.5)
