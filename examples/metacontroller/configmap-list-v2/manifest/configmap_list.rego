# Metacontroller's configmap-list-v2 example (sync.py) as Rego hooks, hook
# version v2: related objects are keyed namespace/name whatever the parent's
# scope.
#
# customize: relate the ConfigMaps labelled spec.sourceLabels, in
# spec.sourceNamespace or, without it, in every namespace.
# sync: a ConfigMap <parent>-list whose data.configmaps lists them, one
# namespace/name a line, sorted; status.count is how many.
package examples.metacontroller.configmap_list_v2

spec := input.parent.spec

rule := {
	"apiVersion": "v1",
	"resource": "configmaps",
	"labelSelector": {"matchLabels": spec.sourceLabels},
}

relatedResources := [object.union(rule, {"namespace": spec.sourceNamespace})] if "sourceNamespace" in object.keys(spec)

relatedResources := [rule] if not "sourceNamespace" in object.keys(spec)

names := sort(object.keys(object.get(input.related, "ConfigMap.v1", {})))

status := {"count": count(names)}

children := [{
	"apiVersion": "v1",
	"kind": "ConfigMap",
	"metadata": {
		"name": concat("", [input.parent.metadata.name, "-list"]),
		"namespace": input.parent.metadata.namespace,
	},
	"data": {"configmaps": concat("\n", names)},
}]
