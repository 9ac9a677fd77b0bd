# Metacontroller's namespace-list-v2 example (sync.py) as Rego hooks, hook
# version v2: a namespaced parent relates cluster-scoped Namespaces, keyed by
# name.
#
# customize: relate the Namespaces spec.labelSelector selects.
# sync: a ConfigMap <parent>-list whose data.namespaces lists them, one a
# line, sorted; status.count is how many.
package examples.metacontroller.namespace_list_v2

relatedResources := [{
	"apiVersion": "v1",
	"resource": "namespaces",
	"labelSelector": object.get(input.parent.spec, "labelSelector", {}),
}]

names := sort(object.keys(object.get(input.related, "Namespace.v1", {})))

status := {"count": count(names)}

children := [{
	"apiVersion": "v1",
	"kind": "ConfigMap",
	"metadata": {
		"name": concat("", [input.parent.metadata.name, "-list"]),
		"namespace": input.parent.metadata.namespace,
	},
	"data": {"namespaces": concat("\n", names)},
}]
