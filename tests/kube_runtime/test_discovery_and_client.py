"""Discovery (plural or kind -> type, with a hint for a missing CRD), paths, and the watch stream's framing."""

from __future__ import annotations

import pytest

from regokite.kube.client import ApiError, WatchStream, resource_path
from regokite.kube.discovery import Discovery, DiscoveryError
from regokite.resources import ChildType
from tests.kube_runtime.fake import FakeKube


def test_resources_resolve_by_plural_or_kind_with_scope_and_status() -> None:
    kube = (
        FakeKube()
        .serve("example.com/v1", "things", "Thing", status=True)
        .serve("v1", "nodes", "Node", namespaced=False)
    )
    d = Discovery(kube)  # type: ignore[arg-type]
    assert d.resolve("example.com/v1", "things") == ChildType("example.com/v1", "things", "Thing", True, True)
    assert d.resolve_kind("v1", "Node") == ChildType("v1", "nodes", "Node", False, False)
    with pytest.raises(DiscoveryError, match=r"has no resource 'widgets' \(it has: things, things/status\)"):
        d.resolve("example.com/v1", "widgets")
    with pytest.raises(DiscoveryError, match=r"does not serve example\.com/v2 .*CustomResourceDefinition installed"):
        d.resolve("example.com/v2", "things")


def test_paths_and_errors() -> None:
    assert (
        resource_path("apps/v1", "deployments", "ns", "a b", "status")
        == "/apis/apps/v1/namespaces/ns/deployments/a%20b/status"
    )
    assert resource_path("v1", "nodes") == "/api/v1/nodes"
    assert str(ApiError(409, "Conflict", {"message": "changed"}, "PATCH /x")) == "PATCH /x: 409 changed"


def test_a_watch_stream_yields_one_event_per_line_across_chunk_boundaries() -> None:
    class Response:
        closed = False

        def stream(self, size: int, decode_content: bool):
            yield b'{"type": "ADDED", "object": {"a": 1}}\n{"type": "MOD'
            yield b'IFIED", "object": {"a": 2}}\n\n'

        def close(self) -> None:
            self.closed = True

    response = Response()
    assert [e["type"] for e in WatchStream(response)] == ["ADDED", "MODIFIED"]
    assert response.closed
