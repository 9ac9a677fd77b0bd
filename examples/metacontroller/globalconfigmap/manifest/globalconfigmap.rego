# Metacontroller's globalconfigmap example (sync.py) as Rego hooks.
#
# customize: relate the source ConfigMap and every Namespace.
# sync: a copy of the source in every other namespace, none once the source is
# gone; status {working: fine}.
package examples.metacontroller.globalconfigmap

spec := input.parent.spec

relatedResources := [
	{
		"apiVersion": "v1",
		"resource": "configmaps",
		"namespace": spec.sourceNamespace,
		"names": [spec.sourceName],
	},
	{
		"apiVersion": "v1",
		"resource": "namespaces",
		"labelSelector": {},
	},
]

status := {"working": "fine"}

# The parent is cluster-scoped: related namespaced objects are keyed namespace/name.
source := input.related["ConfigMap.v1"][concat("/", [spec.sourceNamespace, spec.sourceName])]

configmap(name, namespace, content) := {
	"apiVersion": "v1",
	"kind": "ConfigMap",
	"metadata": {"name": name, "namespace": namespace},
	"data": content,
}

children := [] if count(input.related["ConfigMap.v1"]) == 0

children := [configmap(spec.sourceName, ns.metadata.name, object.get(source, "data", null)) |
	some ns in input.related["Namespace.v1"]
	ns.metadata.name != spec.sourceNamespace
] if {
	count(input.related["ConfigMap.v1"]) > 0
}
