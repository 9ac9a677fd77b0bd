# Metacontroller's configmappropagation hooks (upstream sync.py), in Rego.
#
# customize: relate the source ConfigMap (spec.sourceNamespace/sourceName).
# sync: a copy of the source's data in every target namespace (none once the
# source is gone), and status {expected_copies, actual_copies}, as sync.py.
package examples.metacontroller.configmappropagation

spec := input.parent.spec

relatedResources := [{
	"apiVersion": "v1",
	"resource": "configmaps",
	"namespace": spec.sourceNamespace,
	"names": [spec.sourceName],
}]

related := input.related["ConfigMap.v1"]

children := [] if count(related) == 0

children := [copy(ns) | some ns in spec.targetNamespaces] if count(related) > 0

original := related[sprintf("%s/%s", [spec.sourceNamespace, spec.sourceName])]

copy(ns) := {
	"apiVersion": "v1",
	"kind": "ConfigMap",
	"metadata": {"name": spec.sourceName, "namespace": ns},
	"data": original.data,
}

status := {
	"expected_copies": count(spec.targetNamespaces),
	"actual_copies": count(input.children["ConfigMap.v1"]),
}
