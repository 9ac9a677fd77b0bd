# Metacontroller's secretpropagation example (sync.py) as Rego hooks.
#
# customize: relate the source Secret and the Namespaces that
# targetNamespaceLabelSelector selects.
# sync: a copy of the source in each of them but its own, none once the source
# is gone; status {working: fine}.
package examples.metacontroller.secretpropagation

spec := input.parent.spec

relatedResources := [
	{
		"apiVersion": "v1",
		"resource": "secrets",
		"namespace": spec.sourceNamespace,
		"names": [spec.sourceName],
	},
	{
		"apiVersion": "v1",
		"resource": "namespaces",
		"labelSelector": spec.targetNamespaceLabelSelector,
	},
]

status := {"working": "fine"}

# The parent is cluster-scoped: related namespaced objects are keyed namespace/name.
source := input.related["Secret.v1"][concat("/", [spec.sourceNamespace, spec.sourceName])]

secret(name, namespace, content) := {
	"apiVersion": "v1",
	"kind": "Secret",
	"metadata": {"name": name, "namespace": namespace},
	"data": content,
}

children := [] if count(input.related["Secret.v1"]) == 0

children := [secret(spec.sourceName, ns.metadata.name, object.get(source, "data", null)) |
	some ns in input.related["Namespace.v1"]
	ns.metadata.name != spec.sourceNamespace
] if {
	count(input.related["Secret.v1"]) > 0
}
