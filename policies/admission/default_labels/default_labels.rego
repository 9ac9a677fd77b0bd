# Mutating: gives objects the default labels they lack (by default
# app.kubernetes.io/managed-by=regokite) with RFC 6902 "add" operations.
# Labels an object already has are never changed. Only the object's own
# metadata is labelled, not pod templates: changing a template would roll
# out new pods.
#
# Parameters (data.params.default_labels):
#   labels  {key: value} labels to add when missing
package admission.default_labels

import data.lib.kubernetes

match := {
	"rules": [
		{
			"operations": ["CREATE", "UPDATE"],
			"apiGroups": [""],
			"apiVersions": ["v1"],
			"resources": ["pods", "services", "configmaps", "replicationcontrollers"],
		},
		{
			"operations": ["CREATE", "UPDATE"],
			"apiGroups": ["apps"],
			"apiVersions": ["v1"],
			"resources": ["deployments", "replicasets", "statefulsets", "daemonsets"],
		},
		{
			"operations": ["CREATE", "UPDATE"],
			"apiGroups": ["batch"],
			"apiVersions": ["v1"],
			"resources": ["jobs", "cronjobs"],
		},
	],
	"excludedNamespaces": ["kube-system"],
}

# Failing to add a convenience label must not block the request.
failure_policy := "Ignore"

default defaults := {"app.kubernetes.io/managed-by": "regokite"}

defaults := data.params.default_labels.labels

obj := input.request.object

reviewed if {
	input.request.operation in {"CREATE", "UPDATE"}
	is_object(obj)
}

# missing is the default labels obj lacks, with their values.
missing := {key: value |
	some key, value in defaults
	object.get(kubernetes.labels(obj), key, null) == null
} if reviewed

needed if count(missing) > 0

# No metadata at all: add it with the labels.
patch contains {"op": "add", "path": "/metadata", "value": {"labels": missing}} if {
	needed
	not is_object(object.get(obj, "metadata", null))
}

# Metadata without labels (absent or null): add the whole labels object, as
# a JSON Pointer cannot point inside a member that does not exist yet.
patch contains {"op": "add", "path": "/metadata/labels", "value": missing} if {
	needed
	is_object(obj.metadata)
	not is_object(object.get(obj.metadata, "labels", null))
}

# Existing labels: add each missing one. "/" in a label key is "~1" in a
# JSON Pointer ("~" is "~0").
patch contains {"op": "add", "path": path, "value": value} if {
	needed
	is_object(obj.metadata.labels)
	some key, value in missing
	path := concat("/", ["/metadata/labels", kubernetes.json_pointer_escape(key)])
}
