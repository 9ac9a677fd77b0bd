"""The Fanout job of `bench.controller_converge` and the shard tests: each parent gets three ConfigMaps
carrying its `spec.value`, and a status counting them."""

from __future__ import annotations

CHILDREN = """package fanout

children := [cm(i) | some i in numbers.range(0, 2)]

cm(i) := {
\t"apiVersion": "v1",
\t"kind": "ConfigMap",
\t"metadata": {"name": sprintf("%s-%d", [input.parent.metadata.name, i])},
\t"data": {"value": input.parent.spec.value},
}

"""
STATUS = """
status := {"configMaps": count(input.children["ConfigMap.v1"])}
"""


def controller(group: str) -> str:
    """The CompositeController running package `fanout` for `fanouts` of `group`/v1."""
    return f"""apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {{name: fanout}}
spec:
  generateSelector: true
  parentResource: {{apiVersion: {group}/v1, resource: fanouts}}
  childResources:
    - {{apiVersion: v1, resource: configmaps, updateStrategy: {{method: InPlace}}}}
  hooks:
    sync: {{rego: {{package: fanout}}}}
"""
