# Metacontroller's ConfigMapPropagation example as Rego hooks.
#
# customize input {controller, parent} -> relatedResources: the source ConfigMap.
# sync input {controller, parent, children, related, finalizing}, related
# objects keyed "ConfigMap.v1" then "namespace/name" (the parent is
# cluster-scoped) -> children: a copy of the source in each target namespace,
# and status with the expected and actual number of copies.
package controllers.configmap_propagation

spec := input.parent.spec

relatedResources := [{
	"apiVersion": "v1",
	"resource": "configmaps",
	"namespace": spec.sourceNamespace,
	"names": [spec.sourceName],
}]

source := input.related["ConfigMap.v1"][sprintf("%s/%s", [spec.sourceNamespace, spec.sourceName])]

targets := {ns | some ns in object.get(spec, "targetNamespaces", [])} - {spec.sourceNamespace}

copy(ns) := {
	"apiVersion": "v1",
	"kind": "ConfigMap",
	"metadata": {
		"name": spec.sourceName,
		"namespace": ns,
		"labels": {"examples.regokite.dev/propagated-from": spec.sourceNamespace},
	},
	"data": object.get(source, "data", {}),
}

# No copies until the source exists (a missing source is not an empty one).
children := [copy(ns) | some ns in targets] if source

default children := []

default source_found := false

source_found if source

status := {
	"expected_copies": count(targets),
	"actual_copies": count(object.get(input, ["children", "ConfigMap.v1"], {})),
	"source_found": source_found,
}
