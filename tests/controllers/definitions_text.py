"""Controller definitions as a user writes them (YAML text), for tests that load or apply one."""

from __future__ import annotations


def composite_controller(name: str, parent: str, child: str, hook: str, method: str | None = "InPlace") -> str:
    """A CompositeController of `parent` (example.com/v1) with one v1 `child` resource (updated by `method`, or
    the default with None) and a sync `hook` given as its YAML flow text, e.g. "rego: {package: a.b}"."""
    strategy = f"\n      updateStrategy:\n        method: {method}" if method else ""
    return f"""apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: {name}
spec:
  generateSelector: true
  parentResource:
    apiVersion: example.com/v1
    resource: {parent}
  childResources:
    - apiVersion: v1
      resource: {child}{strategy}
  hooks:
    sync:
      {hook}
"""
